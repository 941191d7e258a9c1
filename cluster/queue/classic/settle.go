package classic

import "github.com/warrenmq/warren/cluster/queue"

// Settle acknowledges deliveries: they are gone for good. IDs that are not
// unsettled (unknown, or settled already) are ignored; the channel has
// validated delivery tags before calling.
func (q *Queue) Settle(ids []uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		if p, ok := q.take(id); ok {
			q.released(int64(p.msg.Size()))
		}
	}
	q.dispatch()
}

// Requeue returns deliveries to the queue, ahead of never-delivered messages
// and in ID order among themselves; they are marked redelivered when sent
// again. The cause does not change what a classic queue does; a quorum
// queue counts it against the delivery limit.
func (q *Queue) Requeue(ids []uint64, _ queue.ReturnCause) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		if p, ok := q.take(id); ok {
			q.ready.pushReturned(entry{id: id, msg: p.msg})
		}
	}
	q.dispatch()
}

// Discard drops deliveries rejected or nacked without requeue.
func (q *Queue) Discard(ids []uint64, _ queue.ReturnCause) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		if p, ok := q.take(id); ok {
			q.released(int64(p.msg.Size()))
			q.discarded(id, p.msg)
		}
	}
	q.dispatch()
}

// discarded is where a message rejected without requeue ends up. Today it is
// simply dropped. Dead-lettering (x-dead-letter-exchange) hooks in here: it
// would collect (id, msg) and, after the lock is released, hand them to the
// broker to republish with an x-death header. q.mu must be held.
func (q *Queue) discarded(uint64, *queue.Message) {}

// take removes id from the unsettled deliveries and frees its owner's credit.
// ok is false when id is not unsettled. q.mu must be held.
func (q *Queue) take(id uint64) (p pending, ok bool) {
	p, ok = q.unsettled[id]
	if !ok {
		return p, false
	}
	delete(q.unsettled, id)
	q.unsettledBytes -= int64(p.msg.Size())
	if c := p.owner; c != nil {
		c.unsettled--
		q.lineup.offer(c) // no-op unless c is attached and can now receive
	}
	return p, true
}
