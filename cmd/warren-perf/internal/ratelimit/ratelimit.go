// Package ratelimit paces a total message rate shared by many goroutines.
//
// It is a virtual-schedule limiter (GCRA): one atomic word holds the time at which the next
// message may go, and each caller claims a slot by advancing it one interval with a CAS. Because
// the schedule is absolute, a goroutine that oversleeps (timer granularity, scheduling) simply
// finds its next slots already due, so the long-run rate stays exact however coarse the sleeps.
// The schedule may fall behind "now" by at most the burst allowance, which caps how many
// messages go out back-to-back after a stall.
package ratelimit

import (
	"context"
	"sync/atomic"
	"time"
)

const (
	// burstWindow is how much lost time the limiter may catch up on at once. 10ms absorbs
	// sleep overshoot without letting a stalled producer fire a large burst.
	burstWindow = 10 * time.Millisecond
	// minSleep: waits shorter than this are not slept; the caller runs at most this far ahead
	// of the schedule, which avoids a timer per message at high rates.
	minSleep = 50 * time.Microsecond
)

// Limiter hands out slots at a fixed rate. The zero value is not usable; a nil *Limiter means
// "unlimited" and never waits.
type Limiter struct {
	interval int64 // ns between slots
	maxLag   int64 // ns the schedule may trail the clock
	next     atomic.Int64
	now      func() int64
}

// New returns a limiter for rate slots per second, or nil (unlimited) if rate <= 0.
func New(rate float64) *Limiter {
	if rate <= 0 {
		return nil
	}
	start := time.Now()
	return newWithClock(rate, func() int64 { return int64(time.Since(start)) })
}

func newWithClock(rate float64, now func() int64) *Limiter {
	interval := int64(float64(time.Second) / rate)
	interval = max(interval, 1)
	return &Limiter{
		interval: interval,
		maxLag:   max(int64(burstWindow), interval),
		now:      now,
	}
}

// reserve claims the next slot and returns how long the caller must wait for it (≤0: go now).
func (l *Limiter) reserve(now int64) time.Duration {
	for {
		cur := l.next.Load()
		slot := max(cur, now-l.maxLag)
		if l.next.CompareAndSwap(cur, slot+l.interval) {
			return time.Duration(slot - now)
		}
	}
}

// Waiter is one goroutine's handle on a shared Limiter; it owns a reusable timer so pacing
// does not allocate per message.
type Waiter struct {
	l     *Limiter
	timer *time.Timer
}

// NewWaiter returns a Waiter for the calling goroutine. A nil limiter gives a Waiter that
// never waits.
func (l *Limiter) NewWaiter() *Waiter {
	return &Waiter{l: l}
}

// Wait blocks until the caller's next slot, or returns ctx.Err() if ctx ends first.
func (w *Waiter) Wait(ctx context.Context) error {
	if w.l == nil {
		return nil
	}
	d := w.l.reserve(w.l.now())
	if d < minSleep {
		return nil
	}
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		// Since Go 1.23 Reset on a fired or stopped timer needs no draining.
		w.timer.Reset(d)
	}
	select {
	case <-w.timer.C:
		return nil
	case <-ctx.Done():
		w.timer.Stop()
		return ctx.Err()
	}
}
