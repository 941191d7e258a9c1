package classic

import "github.com/warrenmq/warren/cluster/queue"

// Get takes the next ready message for basic.get. With noAck it is gone at
// once; otherwise it is unsettled, owned by no consumer, until the channel
// settles, requeues or discards it.
func (q *Queue) Get(noAck bool) (d queue.Delivery, remaining uint32, ok bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return queue.Delivery{}, 0, false, queue.ErrDeleted
	}
	e, redelivered, ok := q.ready.pop()
	if !ok {
		return queue.Delivery{}, 0, false, nil
	}
	if noAck {
		q.released(int64(e.msg.Size()))
	} else {
		q.unsettled[e.id] = pending{msg: e.msg}
		q.unsettledBytes += int64(e.msg.Size())
	}
	d = queue.Delivery{ID: e.id, Message: e.msg, Redelivered: redelivered}
	return d, uint32(q.ready.len()), true, nil
}
