package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a manually advanced clock for deterministic tests.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() int64              { return c.t.Load() }
func (c *fakeClock) advance(d time.Duration) { c.t.Add(int64(d)) }

func TestNilIsUnlimited(t *testing.T) {
	if New(0) != nil || New(-1) != nil {
		t.Fatal("rate <= 0 must give a nil (unlimited) limiter")
	}
	var l *Limiter
	w := l.NewWaiter()
	for range 1000 {
		if err := w.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestScheduleIsEvenlySpaced(t *testing.T) {
	var c fakeClock
	l := newWithClock(1000, c.now) // 1ms per slot
	for i := range 5 {
		if d := l.reserve(c.now()); d != time.Duration(i)*time.Millisecond {
			t.Fatalf("slot %d: wait %v, want %v", i, d, time.Duration(i)*time.Millisecond)
		}
	}
}

// A caller that sleeps exactly as told gets exactly rate slots per second.
func TestRateOverSimulatedSecond(t *testing.T) {
	for _, rate := range []float64{1, 10, 999, 50_000} {
		var c fakeClock
		l := newWithClock(rate, c.now)
		n := 0
		for {
			d := l.reserve(c.now())
			if d > 0 {
				c.advance(d)
			}
			if c.now() >= int64(time.Second) {
				break
			}
			n++
		}
		if want := int(rate); n < want-1 || n > want+1 {
			t.Errorf("rate %v: %d slots in 1s", rate, n)
		}
	}
}

// Oversleeping must not lower the long-run rate: the lost time is caught up.
func TestOversleepIsCompensated(t *testing.T) {
	var c fakeClock
	l := newWithClock(10_000, c.now) // 100µs per slot
	n := 0
	for c.now() < int64(time.Second) {
		if d := l.reserve(c.now()); d > 0 {
			c.advance(d + 700*time.Microsecond) // sleeps run 0.7ms late
		}
		n++
	}
	if n < 9_900 || n > 10_100 {
		t.Fatalf("%d slots in 1s with oversleep, want ≈10000", n)
	}
}

// After an idle period only the burst allowance may go out back-to-back.
func TestBurstAfterIdleIsBounded(t *testing.T) {
	var c fakeClock
	l := newWithClock(1000, c.now)
	l.reserve(c.now())
	c.advance(5 * time.Second)
	immediate := 0
	for l.reserve(c.now()) <= 0 {
		immediate++
	}
	// 10ms of catch-up at 1ms per slot, plus the slot that is due right now.
	if immediate < 10 || immediate > 11 {
		t.Fatalf("%d immediate slots after idle, want 10-11", immediate)
	}
}

// Real clock, several goroutines sharing one limiter: the total rate is honoured.
func TestConcurrentRealTime(t *testing.T) {
	const rate, goroutines = 4000.0, 4
	l := New(rate)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range goroutines {
		wg.Go(func() {
			w := l.NewWaiter()
			for w.Wait(ctx) == nil {
				total.Add(1)
			}
		})
	}
	wg.Wait()
	got := float64(total.Load()) / time.Since(start).Seconds()
	if got < rate*0.85 || got > rate*1.15 {
		t.Fatalf("measured %.0f/s, want %.0f/s ±15%%", got, rate)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	l := New(0.5) // one slot every 2s
	w := l.NewWaiter()
	_ = w.Wait(context.Background()) // first slot is immediate
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := w.Wait(ctx); err == nil {
		t.Fatal("Wait must return the context error")
	}
	if time.Since(start) > time.Second {
		t.Fatal("Wait did not return promptly on cancellation")
	}
}
