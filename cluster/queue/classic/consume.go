package classic

import (
	"errors"

	"github.com/warrenmq/warren/cluster/queue"
)

// ErrAlreadyConsuming is returned when the same queue.Consumer value attaches
// twice. The AMQP channel makes one value per basic.consume, so this is a
// caller bug, not a client error.
var ErrAlreadyConsuming = errors.New("classic: consumer already attached to this queue")

// Consume attaches c and starts delivering to it at once. c is the consumer's
// identity for Cancel and Resume, so it must be comparable (a pointer).
func (q *Queue) Consume(c queue.Consumer, opts queue.ConsumeOptions) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.stopped:
		return queue.ErrDeleted
	case q.consumers[c] != nil:
		return ErrAlreadyConsuming
	case q.exclusive != nil, opts.Exclusive && len(q.consumers) > 0:
		return queue.ErrExclusiveConsumer
	}
	cs := &consumer{
		c:        c,
		tag:      opts.Tag,
		noAck:    opts.NoAck,
		prefetch: opts.Prefetch,
		attached: true,
	}
	q.consumers[c] = cs
	if opts.Exclusive {
		q.exclusive = cs
	}
	q.lineup.join(cs, opts.Priority)
	q.lineup.offer(cs)
	q.dispatch()
	return nil
}

// Cancel detaches c. Its unsettled deliveries stay where they are: the
// channel still settles or requeues them by ID. Cancelling the last consumer
// fires Options.OnUnused, once in the queue's life.
func (q *Queue) Cancel(c queue.Consumer) {
	if q.cancel(c) && q.opts.OnUnused != nil {
		q.opts.OnUnused()
	}
}

// cancel is Cancel under the lock; it reports whether OnUnused is due.
func (q *Queue) cancel(c queue.Consumer) (unused bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cs := q.consumers[c]
	if cs == nil {
		return false
	}
	q.lineup.leave(cs)
	cs.attached = false
	delete(q.consumers, c)
	if q.exclusive == cs {
		q.exclusive = nil
	}
	// No dispatch: every operation ends by dispatching until no message is
	// ready or no consumer can receive, and a cancel makes neither true (its
	// unsettled messages stay unsettled, as in RabbitMQ).
	if len(q.consumers) == 0 && !q.unusedFired {
		q.unusedFired = true
		return true
	}
	return false
}

// Resume lets c, blocked since its Deliver returned false, receive again.
func (q *Queue) Resume(c queue.Consumer) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cs := q.consumers[c]
	if cs == nil || !cs.blocked {
		return
	}
	cs.blocked = false
	q.lineup.offer(cs)
	q.dispatch()
}
