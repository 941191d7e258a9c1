package raftq

// Peeked is a ready message as an operator peeks at it (rabbitmq-queues
// peek): where its enqueue entry is, and the counts the queue keeps.
type Peeked struct {
	// Index is the log index of its enqueue entry, which holds the message.
	Index uint64
	// DeliveryCount and AcquiredCount are what a delivery now would carry
	// as x-delivery-count and x-acquired-count.
	DeliveryCount, AcquiredCount uint32
	Priority                     uint8
}

// Peek is the message at position pos (1 for the next) among the ready
// messages, in the order they would be handed out (rabbit_fifo's
// query_peek: returned messages first, then by priority), without taking
// it. Messages waiting out a delayed retry or checked out to a consumer
// have no position. ok is false when fewer than pos are ready.
func (m *Machine) Peek(pos int) (p Peeked, ok bool) {
	x := m.ready.nth(pos - 1)
	if x == nil {
		return Peeked{}, false
	}
	return Peeked{Index: x.index, DeliveryCount: x.delivery, AcquiredCount: x.acquired, Priority: x.priority}, true
}
