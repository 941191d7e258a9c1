package raftq

import "slices"

// AppendConsumerIDs appends the IDs of every consumer the machine knows
// (attached, detached with messages still checked out, and basic.get
// owners), in ascending order. A runtime that starts leading uses it to
// tell the machine which of them are gone.
func (m *Machine) AppendConsumerIDs(dst []ConsumerID) []ConsumerID {
	start := len(dst)
	for id := range m.consumers.byID {
		dst = append(dst, id)
	}
	slices.Sort(dst[start:])
	return dst
}

// Keeps says whether consumer id must keep its place while it is away,
// attaching again through a new leader: it is the exclusive consumer, or
// the single active one. Detaching it would let another take its place
// while it still works on what it holds.
func (m *Machine) Keeps(id ConsumerID) bool {
	c := m.consumers.byID[id]
	return c != nil && c.attached && (m.consumers.exclusive == c || m.consumers.active == c)
}

// Suspended says whether consumer id is attached and suspended
// (OpSuspend): handed nothing until it attaches again.
func (m *Machine) Suspended(id ConsumerID) bool {
	c := m.consumers.byID[id]
	return c != nil && c.suspended
}

// Cancelled says whether consumer id is known, detached and not a
// basic.get owner: a consumer cancelled with messages still checked out,
// which its channel may yet settle.
func (m *Machine) Cancelled(id ConsumerID) bool {
	c := m.consumers.byID[id]
	return c != nil && !c.getter && !c.attached
}

// Known says whether the machine knows consumer id: attached, or holding
// messages.
func (m *Machine) Known(id ConsumerID) bool { return m.consumers.byID[id] != nil }

// Getter says whether consumer id is a basic.get owner.
func (m *Machine) Getter(id ConsumerID) bool {
	c := m.consumers.byID[id]
	return c != nil && c.getter
}

// ConsumerStatus is what a consumer is doing, for operators: RabbitMQ's
// activity_status, plus the records a quorum queue keeps for consumers
// that no longer receive.
type ConsumerStatus string

const (
	// StatusUp: attached, competing for messages with the others.
	StatusUp ConsumerStatus = "up"
	// StatusSingleActive: the single active consumer.
	StatusSingleActive ConsumerStatus = "single active"
	// StatusQuiescing: the single active consumer, receiving nothing more
	// while a higher-priority consumer waits for it to settle what it holds.
	StatusQuiescing ConsumerStatus = "quiescing"
	// StatusWaiting: attached to a single-active-consumer queue, waiting
	// for its turn.
	StatusWaiting ConsumerStatus = "waiting"
	// StatusCancelled: detached, still holding checked-out messages that
	// its channel may settle.
	StatusCancelled ConsumerStatus = "cancelled"
	// StatusGet: a channel's basic.get messages not yet settled.
	StatusGet ConsumerStatus = "basic.get"
	// StatusSuspectedDown: its link to the leader broke, and it keeps
	// what it holds, and its place, for the consumer disconnected
	// timeout, receiving nothing (RabbitMQ's suspected_down): an
	// attached consumer suspended (OpSuspend), or, as the leader's
	// runtime knows, a detached one whose deliveries wait for it.
	StatusSuspectedDown ConsumerStatus = "suspected down"
)

// ConsumerView is one consumer record as the machine has it.
type ConsumerView struct {
	ID       ConsumerID
	Status   ConsumerStatus
	Prefetch uint32 // its credit; the machine's largest for no limit
	Priority int32
	// Held counts its checked-out messages.
	Held      uint32
	Exclusive bool
}

// AppendConsumers appends a view of every consumer record (attached,
// detached with messages checked out, basic.get owners), by ID.
func (m *Machine) AppendConsumers(dst []ConsumerView) []ConsumerView {
	start := len(dst)
	for _, c := range m.consumers.byID {
		dst = append(dst, ConsumerView{ID: c.id, Status: m.consumers.status(c), Prefetch: c.prefetch, Priority: c.priority,
			Held: c.held, Exclusive: c.exclusive})
	}
	slices.SortFunc(dst[start:], func(a, b ConsumerView) int { return cmpID(a.ID, b.ID) })
	return dst
}

func (cs *consumers) status(c *consumer) ConsumerStatus {
	switch {
	case c.getter:
		return StatusGet
	case !c.attached:
		return StatusCancelled
	case c.suspended:
		return StatusSuspectedDown
	case !cs.m.cfg.SingleActiveConsumer:
		return StatusUp
	case cs.active != c:
		return StatusWaiting
	case c.quiescing:
		return StatusQuiescing
	}
	return StatusSingleActive
}
