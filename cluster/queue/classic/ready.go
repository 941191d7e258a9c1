package classic

import "github.com/warrenmq/warren/cluster/queue"

// entry is a message as the queue stores it, with the ID that settles it.
type entry struct {
	id  uint64
	msg *queue.Message
}

// readyMessages holds the messages waiting for a consumer, in the order
// RabbitMQ serves them: messages that came back first, lowest ID first, then
// the never-delivered ones in publish order.
//
// Because never-delivered messages leave fresh in ID order, every message that
// was ever delivered has a lower ID than every one still in fresh; so this
// order is simply ascending ID, and a returned message never needs to be
// merged into fresh.
type readyMessages struct {
	returned returnedHeap // delivered before, came back; Redelivered when sent again
	fresh    ring[entry]  // never delivered, in publish (= ID) order
}

func (r *readyMessages) len() int { return r.returned.len() + r.fresh.len() }

func (r *readyMessages) pushFresh(e entry) { r.fresh.push(e) }

func (r *readyMessages) pushReturned(e entry) { r.returned.push(e) }

// pop takes the next message to deliver; redelivered says it was delivered
// before. ok is false when nothing is ready.
func (r *readyMessages) pop() (e entry, redelivered, ok bool) {
	if r.returned.len() > 0 {
		return r.returned.pop(), true, true
	}
	e, ok = r.fresh.pop()
	return e, false, ok
}

// clear drops every ready message and returns how many there were.
func (r *readyMessages) clear() int {
	n := r.len()
	r.returned.reset()
	r.fresh.reset()
	return n
}
