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
