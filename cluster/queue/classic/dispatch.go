package classic

import "github.com/warrenmq/warren/cluster/queue"

// dispatch hands ready messages to consumers until either runs out. Every
// operation that adds a ready message or lets a consumer receive again ends
// by calling it. q.mu must be held.
func (q *Queue) dispatch() {
	for q.ready.len() > 0 {
		c := q.lineup.next()
		if c == nil {
			return
		}
		e, redelivered, _ := q.ready.pop()
		q.deliver(c, e, redelivered)
		q.lineup.offer(c)
	}
}

// deliver hands e to c. A no-ack delivery is settled by being sent, so only
// acked ones are recorded as unsettled. q.mu must be held.
func (q *Queue) deliver(c *consumer, e entry, redelivered bool) {
	if c.noAck {
		q.released(int64(e.msg.Size()))
	} else {
		q.unsettled[e.id] = pending{msg: e.msg, owner: c}
		q.unsettledBytes += int64(e.msg.Size())
		c.unsettled++
	}
	if !c.c.Deliver(queue.Delivery{ID: e.id, Message: e.msg, Redelivered: redelivered}) {
		c.blocked = true
	}
}
