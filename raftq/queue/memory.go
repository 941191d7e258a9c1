package queue

import (
	"sync"
	"sync/atomic"
)

// Budget keeps the node's memory alarm on while the node uses as much
// memory as its limit or more, RabbitMQ's memory high watermark: while
// the alarm is on, publishing connections across the cluster are blocked
// (connection.blocked, and their sockets are no longer read) until
// consumers, purges or a higher limit bring the node back under it.
//
// The memory used is what the memory monitor last saw the process use
// (Observe, about every second), moved at once by the message bytes
// in-memory queues take and let go of since (Add, Release): a burst of
// publishes into classic queues meets the watermark without waiting for
// the next look, and so do the consumers that drain them. Without a
// monitor (tests running several nodes in one process) only those
// message bytes count. A limit of zero or less never raises the alarm; a
// nil *Budget counts nothing.
type Budget struct {
	limit atomic.Int64
	held  atomic.Int64 // message bytes in in-memory queues
	rest  atomic.Int64 // the rest of the node's memory at the last look
	on    atomic.Bool
	// flip is told each time the alarm goes on or off (the node raises
	// and clears its memory alarm); nil: the state is only kept here.
	flip func(on bool)

	// mu serializes the alarm's transitions.
	mu sync.Mutex
}

// NewBudget returns a budget of limit bytes that calls flip (which may be
// nil) each time the memory alarm goes on or off.
func NewBudget(limit int64, flip func(on bool)) *Budget {
	b := &Budget{flip: flip}
	b.limit.Store(limit)
	return b
}

// Add counts n more message bytes held.
func (b *Budget) Add(n int64) {
	if b == nil || n == 0 {
		return
	}
	if used := b.held.Add(n) + b.rest.Load(); !b.on.Load() {
		if limit := b.limit.Load(); limit > 0 && used >= limit {
			b.update()
		}
	}
}

// Release counts n message bytes no longer held.
func (b *Budget) Release(n int64) {
	if b == nil || n == 0 {
		return
	}
	if used := b.held.Add(-n) + b.rest.Load(); b.on.Load() && used < b.limit.Load() {
		b.update()
	}
}

// Observe takes the memory the node uses now, message bytes included
// (alarm.MemoryMonitor), and puts the alarm where it says.
func (b *Budget) Observe(inUse int64) {
	if b == nil {
		return
	}
	b.rest.Store(max(inUse-b.held.Load(), 0))
	b.update()
}

// SetLimit changes the limit (rabbitmqctl set_vm_memory_high_watermark);
// the alarm follows at once.
func (b *Budget) SetLimit(limit int64) {
	b.limit.Store(limit)
	b.update()
}

// update puts the alarm where the counts say. It looks again after each
// flip: an add or release racing it may have read the old state and left
// the flip to it.
func (b *Budget) update() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		limit := b.limit.Load()
		on := limit > 0 && b.Used() >= limit
		if on == b.on.Load() {
			return
		}
		b.on.Store(on)
		if b.flip != nil {
			b.flip(on)
		}
	}
}

// Used is the memory the node uses as the alarm counts it: at the last
// look, plus the message bytes taken since, less those let go.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.held.Load() + b.rest.Load()
}

// Held is the message bytes in-memory queues hold now.
func (b *Budget) Held() int64 {
	if b == nil {
		return 0
	}
	return b.held.Load()
}

// Limit is the limit in bytes; zero or less is none.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit.Load()
}

// On reports whether the memory alarm is on.
func (b *Budget) On() bool { return b != nil && b.on.Load() }
