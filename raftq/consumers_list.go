package raftq

import "slices"

// AppendConsumerIDs appends the IDs of every consumer the machine knows
// (attached, detached with messages still checked out, and basic.get
// owners), in ascending order. A runtime that starts leading uses it to
// tell the machine which of them are gone.
func (m *Machine) AppendConsumerIDs(dst []ConsumerID) []ConsumerID {
	start := len(dst)
	for id := range m.consumers {
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
	c := m.consumers[id]
	return c != nil && c.attached && (m.exclusive == c || m.active == c)
}

// Cancelled says whether consumer id is known, detached and not a
// basic.get owner: a consumer cancelled with messages still checked out,
// which its channel may yet settle.
func (m *Machine) Cancelled(id ConsumerID) bool {
	c := m.consumers[id]
	return c != nil && !c.getter && !c.attached
}

// Known says whether the machine knows consumer id: attached, or holding
// messages.
func (m *Machine) Known(id ConsumerID) bool { return m.consumers[id] != nil }

// Getter says whether consumer id is a basic.get owner.
func (m *Machine) Getter(id ConsumerID) bool {
	c := m.consumers[id]
	return c != nil && c.getter
}
