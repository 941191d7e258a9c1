package classic

import (
	"context"

	"github.com/warrenmq/warren/cluster/queue"
)

// Enqueue stores m and delivers it if a consumer can take it. Memory is the
// storage, so m is stored, and done(nil) called, before Enqueue returns. A
// classic queue has no inbound limit yet, so Enqueue never blocks and ctx is
// not consulted; a max-length overflow policy would start here.
func (q *Queue) Enqueue(_ context.Context, m *queue.Message, done func(error)) error {
	err := q.enqueue(m)
	if done != nil {
		done(err)
	}
	return err
}

// enqueue is Enqueue under the lock; done is called after, to keep the
// publisher's confirm bookkeeping out of the critical section.
func (q *Queue) enqueue(m *queue.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return queue.ErrDeleted
	}
	q.lastID++
	q.held(m)
	q.ready.pushFresh(entry{id: q.lastID, msg: m})
	q.dispatch()
	return nil
}
