package queue

import (
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/cluster/alarm"
)

// Budget counts the message bytes a node's queues hold in memory and keeps
// the node's memory alarm on while they are at or above a limit, like
// RabbitMQ's memory high watermark: while the alarm is on, publishing
// connections across the cluster are blocked (connection.blocked, and
// their sockets are no longer read) until consumers or purges bring the
// total back under the limit. A limit of zero or less never raises it; a
// nil *Budget counts nothing.
type Budget struct {
	limit  atomic.Int64
	used   atomic.Int64
	on     atomic.Bool
	alarms *alarm.Set // nil: the state is only kept here

	// mu serializes the alarm's transitions.
	mu sync.Mutex
}

// NewBudget returns a budget of limit bytes that raises and clears
// alarms' memory alarm (alarms may be nil).
func NewBudget(limit int64, alarms *alarm.Set) *Budget {
	b := &Budget{alarms: alarms}
	b.limit.Store(limit)
	return b
}

// Add counts n more bytes held.
func (b *Budget) Add(n int64) {
	if b == nil || n == 0 {
		return
	}
	if used := b.used.Add(n); !b.on.Load() {
		if limit := b.limit.Load(); limit > 0 && used >= limit {
			b.update()
		}
	}
}

// Release counts n bytes no longer held.
func (b *Budget) Release(n int64) {
	if b == nil || n == 0 {
		return
	}
	if used := b.used.Add(-n); b.on.Load() && used < b.limit.Load() {
		b.update()
	}
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
		on := limit > 0 && b.used.Load() >= limit
		if on == b.on.Load() {
			return
		}
		b.on.Store(on)
		if b.alarms == nil {
			continue
		}
		if on {
			b.alarms.Raise(alarm.Memory)
		} else {
			b.alarms.Clear(alarm.Memory)
		}
	}
}

// Used is the number of bytes held now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
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
