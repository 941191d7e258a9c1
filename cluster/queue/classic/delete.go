package classic

import "github.com/warrenmq/warren/cluster/queue"

// Purge removes every ready message and returns how many. Unsettled
// deliveries are not ready and stay, as in RabbitMQ.
func (q *Queue) Purge() (uint32, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return 0, queue.ErrDeleted
	}
	q.released(q.heldBytes - q.unsettledBytes)
	return uint32(q.ready.clear()), nil
}

// Delete stops the queue: its messages are dropped, its consumers detached
// and told Gone, and later calls fail with queue.ErrDeleted or do nothing.
// It returns the number of ready messages it held (delete-ok's
// message-count). With ifUnused it refuses while consumers are attached;
// with ifEmpty, while messages are ready.
func (q *Queue) Delete(ifUnused, ifEmpty bool) (uint32, error) {
	n, gone, err := q.delete(ifUnused, ifEmpty)
	for _, c := range gone {
		c.Gone()
	}
	return n, err
}

// delete is Delete under the lock; it returns the consumers to tell Gone.
func (q *Queue) delete(ifUnused, ifEmpty bool) (uint32, []queue.Consumer, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.stopped:
		return 0, nil, queue.ErrDeleted
	case ifUnused && len(q.consumers) > 0:
		return 0, nil, queue.ErrInUse
	case ifEmpty && q.ready.len() > 0:
		return 0, nil, queue.ErrNotEmpty
	}
	n := uint32(q.ready.len())
	return n, q.stop(), nil
}

// Close stops the queue because this node is shutting down. Memory is all a
// classic queue has, so its messages go just as with Delete; but consumers
// are not told (their connections are closing too) and OnUnused does not
// fire (the queue still exists in the broker's metadata).
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.stopped {
		q.stop()
	}
}

// stop drops every message and consumer and returns the consumers that were
// attached. q.mu must be held.
func (q *Queue) stop() []queue.Consumer {
	q.stopped = true
	q.released(q.heldBytes)
	q.unsettledBytes = 0
	attached := make([]queue.Consumer, 0, len(q.consumers))
	for c, cs := range q.consumers {
		cs.attached = false
		attached = append(attached, c)
	}
	q.ready.clear()
	q.consumers = nil
	q.unsettled = nil
	q.lineup.reset()
	q.exclusive = nil
	return attached
}
