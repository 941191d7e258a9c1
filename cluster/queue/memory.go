package queue

import (
	"sync"
	"sync/atomic"
)

// Budget counts the message bytes a node's queues hold in memory and raises
// an alarm above a limit, like RabbitMQ's memory high watermark: while the
// alarm is on, publishing connections are blocked (connection.blocked, and
// their sockets are no longer read) until consumers or purges bring the
// total back under the limit. A nil *Budget counts nothing.
type Budget struct {
	limit int64
	used  atomic.Int64
	on    atomic.Bool

	mu    sync.Mutex
	clear chan struct{} // closed when the current alarm clears
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget {
	return &Budget{limit: limit}
}

// Add counts n more bytes held.
func (b *Budget) Add(n int64) {
	if b == nil || n == 0 {
		return
	}
	if b.used.Add(n) >= b.limit && !b.on.Load() {
		b.mu.Lock()
		if !b.on.Load() && b.used.Load() >= b.limit {
			b.clear = make(chan struct{})
			b.on.Store(true)
		}
		b.mu.Unlock()
	}
}

// Release counts n bytes no longer held.
func (b *Budget) Release(n int64) {
	if b == nil || n == 0 {
		return
	}
	if b.used.Add(-n) < b.limit && b.on.Load() {
		b.mu.Lock()
		if b.on.Load() && b.used.Load() < b.limit {
			close(b.clear)
			b.on.Store(false)
		}
		b.mu.Unlock()
	}
}

// Used is the number of bytes held now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Alarm returns nil when there is room, or a channel that is closed when
// the alarm clears.
func (b *Budget) Alarm() <-chan struct{} {
	if b == nil || !b.on.Load() {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on.Load() {
		return nil
	}
	return b.clear
}
