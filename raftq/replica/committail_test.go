package replica

import (
	"testing"
	"time"
)

// commitOnce records one entry appended at at and committed took later.
func commitOnce(c *commitTail, at time.Time, took time.Duration) {
	c.record(took, at.Add(took))
}

// window feeds c one window of commits starting at t0, slow of them
// in every hundred taking slowTook and the rest 1 ms, then closes it; it
// returns the hold the window set and when the next window starts.
func window(c *commitTail, t0 time.Time, slow int, slowTook time.Duration) (time.Duration, time.Time) {
	at := t0
	for i := range 200 {
		took := time.Millisecond
		if i%100 >= 100-slow {
			took = slowTook
		}
		commitOnce(c, at, took)
		at = at.Add(4 * time.Millisecond)
	}
	// The window closes with the first commit a second after it opened.
	end := t0.Add(tailWindow)
	commitOnce(c, end, time.Millisecond)
	return time.Duration(c.wait.Load()), end
}

// A window's p99 (its bucket's upper bound) gates and bounds the hold:
// with a linger of 2 ms and a share of a half, nothing is held while the
// p99 is under 4 ms, at most half the p99 from there, and the whole
// linger from a p99 of 4 ms on; once holding, the holds go on down to a
// p99 of 3 ms (tailHysteresis).
func TestCommitTailHoldsWhereTheTailHidesIt(t *testing.T) {
	c := &commitTail{share: 0.5, linger: 2 * time.Millisecond}
	at := time.Unix(1000, 0)
	for i, w := range []struct {
		slow     int // of every hundred commits, 1 ms the others
		slowTook time.Duration
		want     time.Duration
	}{
		{0, 0, 0},                       // p99 1.25 ms: quick commits, no hold
		{2, 3500 * time.Microsecond, 0}, // p99 3.75 ms: under twice the linger, no hold
		{2, 8 * time.Millisecond, 2 * time.Millisecond},       // p99 8.25 ms: the whole linger
		{2, 3100 * time.Microsecond, 1625 * time.Microsecond}, // p99 3.25 ms, holding: half of it
		{2, 2600 * time.Microsecond, 0},                       // p99 2.75 ms: below three quarters of 4 ms
		{2, 3100 * time.Microsecond, 0},                       // p99 3.25 ms, not holding: not enough to start
		{2, 4 * time.Millisecond, 2 * time.Millisecond},       // p99 4.25 ms: holding again
	} {
		var got time.Duration
		if got, at = window(c, at, w.slow, w.slowTook); got != w.want {
			t.Fatalf("window %d (%d%% of commits %v): hold %v, want %v", i, w.slow, w.slowTook, got, w.want)
		}
	}
}

// No hold is set before a window has passed.
func TestCommitTailWaitsForTheWindow(t *testing.T) {
	c := &commitTail{share: 0.5, linger: 2 * time.Millisecond}
	at := time.Unix(1000, 0)
	for i := range 200 {
		commitOnce(c, at, 8*time.Millisecond)
		if c.wait.Load() != 0 {
			t.Fatalf("hold set after %d samples, before the window passed", i+1)
		}
		at = at.Add(4 * time.Millisecond)
	}
}

// A window with too few samples to say (a queue publishing a few
// messages a second) leaves the hold as it was.
func TestCommitTailNeedsSamples(t *testing.T) {
	c := &commitTail{share: 0.5, linger: 2 * time.Millisecond}
	t0 := time.Unix(1000, 0)
	for i := range tailSamples - 2 {
		commitOnce(c, t0.Add(time.Duration(i)*10*time.Millisecond), 40*time.Millisecond)
	}
	commitOnce(c, t0.Add(2*tailWindow), 40*time.Millisecond)
	if got := c.wait.Load(); got != 0 {
		t.Fatalf("hold %v set from %d samples", time.Duration(got), tailSamples-1)
	}
}
