package classic

import (
	"sync"

	"github.com/warrenmq/warren/cluster/queue"
)

// Options are a classic queue's settings.
type Options struct {
	// OnUnused is called (outside the queue's lock, at most once) when the
	// last consumer is cancelled after at least one consumer had attached;
	// the broker deletes auto-delete queues then.
	OnUnused func()
	// Budget, if set, counts the bytes of the messages this queue holds
	// towards the node's memory alarm.
	Budget *queue.Budget
}

// Queue is an in-memory queue on one node. See the package comment for how
// it stores messages and chooses consumers.
type Queue struct {
	name string
	opts Options

	mu        sync.Mutex
	stopped   bool   // by Delete or Close: every later call fails or does nothing
	lastID    uint64 // IDs start at 1, so 0 never names a message
	ready     readyMessages
	unsettled map[uint64]pending
	consumers map[queue.Consumer]*consumer
	lineup    lineup
	// exclusive is the attached exclusive consumer, if any: while it is
	// set nobody else may attach.
	exclusive *consumer
	// unusedFired makes OnUnused fire once. Only cancelling an attached
	// consumer can fire it, so a queue nobody consumed from never does
	// (RabbitMQ's auto-delete rule).
	unusedFired bool
	// heldBytes and unsettledBytes are the body bytes of every message
	// held and of those delivered but not yet settled; ready bytes are the
	// difference. They feed opts.Budget.
	heldBytes      int64
	unsettledBytes int64
}

// pending is a delivered message awaiting settlement.
type pending struct {
	msg *queue.Message
	// owner is the consumer holding the message, whose credit settling it
	// frees; nil for basic.get, which has no credit to free.
	owner *consumer
}

var _ queue.Queue = (*Queue)(nil)

// New returns an empty queue called name.
func New(name string, opts Options) *Queue {
	return &Queue{
		name:      name,
		opts:      opts,
		unsettled: make(map[uint64]pending),
		consumers: make(map[queue.Consumer]*consumer),
	}
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

// Stats counts the queue's messages and consumers.
func (q *Queue) Stats() queue.Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return queue.Stats{
		Ready:     uint32(q.ready.len()),
		Unacked:   uint32(len(q.unsettled)),
		Consumers: uint32(len(q.consumers)),
	}
}

// held counts a message's bytes as held by the queue. q.mu must be held.
func (q *Queue) held(m *queue.Message) {
	n := int64(m.Size())
	q.heldBytes += n
	q.opts.Budget.Add(n)
}

// released counts bytes the queue no longer holds. q.mu must be held.
func (q *Queue) released(n int64) {
	q.heldBytes -= n
	q.opts.Budget.Release(n)
}
