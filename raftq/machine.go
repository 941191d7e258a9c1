package raftq

import "fmt"

// Meta is what the log says about an entry besides its command.
type Meta struct {
	// Index is the entry's Raft log index. Indexes strictly increase from
	// one applied entry to the next; an enqueue's index is its message's ID.
	Index uint64
}

// Machine is one quorum queue's state: a deterministic function of its
// Config, its creation time and the commands applied so far. It is not safe
// for concurrent use; the Raft FSM that owns it applies entries one at a
// time and reads it between them.
type Machine struct {
	cfg Config
	// version is the machine version the queue runs (version.go): 1 from
	// its creation, raised by OpUpgrade.
	version uint32

	// lastIndex is the index of the last applied entry.
	lastIndex uint64
	// clock is the greatest Now any command carried: the queue's time never
	// runs backwards even if a new leader's clock is behind the old one's
	// (rabbit_fifo's return_one takes max(LastTs, Ts) for the same reason).
	clock int64
	// lastActive is when the queue was last used, for x-expires: creation,
	// basic.get, a consumer leaving, Touch.
	lastActive int64
	// deleteRequested is set once EffectDeleteQueue was emitted.
	deleteRequested bool

	// The parts (the package doc lists what each owns). A message is in
	// exactly one of ready, delayed, checkouts and dead.
	ready ready
	// delayed are returned messages waiting out their delayed retry.
	delayed   delayed
	checkouts checkouts
	consumers consumers
	dead      deadLetters
	// publishers are the deduplication records of tracked publishers.
	publishers publishers

	// out collects the effects of the command being applied.
	out []Effect
}

// New returns the machine of an empty queue with configuration cfg,
// created at Unix millisecond created (from the queue's metadata, so that
// every member starts alike).
func New(cfg Config, created int64) *Machine {
	m := &Machine{
		cfg:        cfg,
		version:    1,
		clock:      created,
		lastActive: created,
		checkouts:  newCheckouts(),
		dead:       deadLetters{byIndex: make(map[uint64]deadLetter)},
		publishers: make(map[uint64]publisher),
	}
	m.consumers = consumers{m: m, byID: make(map[ConsumerID]*consumer)}
	return m
}

// Config is the configuration the machine runs with.
func (m *Machine) Config() Config { return m.cfg }

// LastIndex is the index of the last entry applied.
func (m *Machine) LastIndex() uint64 { return m.lastIndex }

// Clock is the queue's time: the greatest Now applied so far.
func (m *Machine) Clock() int64 { return m.clock }

// DeleteRequested says EffectDeleteQueue was emitted: a new leader finds
// here that the deletion is still to be carried out.
func (m *Machine) DeleteRequested() bool { return m.deleteRequested }

// Apply applies one committed command and appends its effects to out,
// which it returns. Apply is deterministic: the same machine, given the
// same entries, produces the same state and effects on every member. It
// panics if an invariant breaks (for instance an index that does not
// increase), never because of what a client did.
func (m *Machine) Apply(meta Meta, c *Command, out []Effect) []Effect {
	if meta.Index <= m.lastIndex {
		panic(fmt.Sprintf("raftq: applying index %d after %d", meta.Index, m.lastIndex))
	}
	m.lastIndex = meta.Index
	m.clock = max(m.clock, c.Now)
	m.out = out
	m.delayed.promote(m.clock, &m.ready)
	switch c.Op {
	case OpEnqueue:
		m.enqueue(meta.Index, c)
	case OpPublisherDown:
		delete(m.publishers, c.Publisher)
	case OpAttach:
		m.consumers.attach(meta.Index, c)
	case OpDetach:
		m.consumers.detach(c.Consumer)
	case OpConsumerDown:
		m.consumers.down(c.Consumer)
	case OpSuspend:
		m.consumers.suspend(c.Consumer)
	case OpSettle:
		m.consumers.settle(c.Consumer, c.IDs)
	case OpReturn:
		m.consumers.requeue(c.Consumer, c.IDs, c.Cause)
	case OpDiscard:
		m.consumers.discard(c.Consumer, c.IDs, c.Cause)
	case OpPurge:
		m.purge()
	case OpGet:
		m.consumers.get(meta.Index, c.Consumer, c.NoAck)
	case OpTick:
		m.tick()
	case OpDeadLetterSettled:
		m.dead.settled(c.IDs)
	case OpTouch:
		m.lastActive = m.clock
	case OpUpdateConfig:
		m.updateConfig(c.Config)
	case OpUpgrade:
		m.upgrade(c.Version)
	default:
		panic(fmt.Sprintf("raftq: applying unknown op %d", c.Op))
	}
	// Every command ends as rabbit_fifo's checkout/4 does: expired
	// messages leave the head, ready messages go to consumers that can
	// take them, and the length limits are enforced.
	m.consumers.dispatch()
	m.enforceLimits()
	out, m.out = m.out, nil
	return out
}

func (m *Machine) emit(e Effect) { m.out = append(m.out, e) }

// ActiveConsumer is the single active consumer, if the queue has that on
// and a consumer is active.
func (m *Machine) ActiveConsumer() (ConsumerID, bool) {
	if m.consumers.active == nil {
		return 0, false
	}
	return m.consumers.active.id, true
}

// Stats counts a queue's contents.
type Stats struct {
	// Ready messages wait for a consumer (declare-ok's message-count).
	Ready      int
	ReadyBytes int64
	// Unacked messages are checked out to a consumer or a basic.get.
	Unacked int
	// Delayed messages were returned and wait out their delayed retry
	// (counted neither ready nor unacked, as RabbitMQ 4.3 counts them).
	Delayed      int
	DelayedBytes int64
	// Consumers are attached (basic.consume, not yet cancelled).
	Consumers int
	// DeadLettered messages await at-least-once confirmation.
	DeadLettered      int
	DeadLetteredBytes int64
}

// Stats counts the queue's messages and consumers.
func (m *Machine) Stats() Stats {
	return Stats{
		Ready:             m.ready.n,
		ReadyBytes:        m.ready.bytes,
		Unacked:           m.checkouts.len(),
		Delayed:           len(m.delayed.q),
		DelayedBytes:      m.delayed.bytes,
		Consumers:         m.consumers.attached,
		DeadLettered:      len(m.dead.byIndex),
		DeadLetteredBytes: m.dead.bytes,
	}
}
