package replica

import (
	"testing"
	"time"
)

// commitOnce records one entry appended at at and committed took later.
func commitOnce(c *commitTail, at time.Time, took time.Duration) {
	c.record(took, at.Add(took))
}

// A window's p99 sets the hold: a quarter of it with share 0.25 (the
// p99's bucket's upper bound), once the window has passed with enough
// samples.
func TestCommitTailHoldIsShareOfP99(t *testing.T) {
	c := &commitTail{share: 0.25}
	t0 := time.Unix(1000, 0)
	at := t0
	for i := range 200 {
		took := time.Millisecond
		if i%100 == 99 {
			took = 8 * time.Millisecond // the slowest 1%
		}
		commitOnce(c, at, took)
		if c.wait.Load() != 0 {
			t.Fatalf("hold set after %d samples, before the window passed", i+1)
		}
		at = at.Add(4 * time.Millisecond)
	}
	// The window closes with the first commit a second after it opened.
	commitOnce(c, t0.Add(tailWindow), time.Millisecond)
	// 201 samples: the 199th is the p99, in the 1 ms bucket [1, 1.25).
	if got, want := time.Duration(c.wait.Load()), 1250*time.Microsecond/4; got != want {
		t.Fatalf("hold %v, want %v", got, want)
	}
	// A window where 2% are slow: the p99 is theirs.
	at = t0.Add(tailWindow)
	for i := range 100 {
		took := time.Millisecond
		if i%50 == 49 {
			took = 8 * time.Millisecond
		}
		commitOnce(c, at, took)
		at = at.Add(5 * time.Millisecond)
	}
	commitOnce(c, at.Add(tailWindow), time.Millisecond)
	if got, want := time.Duration(c.wait.Load()), 8250*time.Microsecond/4; got != want {
		t.Fatalf("hold %v after a slow window, want %v", got, want)
	}
}

// A window with too few samples to say (a queue publishing a few
// messages a second) leaves the hold as it was.
func TestCommitTailNeedsSamples(t *testing.T) {
	c := &commitTail{share: 0.25}
	t0 := time.Unix(1000, 0)
	for i := range tailSamples - 2 {
		commitOnce(c, t0.Add(time.Duration(i)*10*time.Millisecond), 40*time.Millisecond)
	}
	commitOnce(c, t0.Add(2*tailWindow), 40*time.Millisecond)
	if got := c.wait.Load(); got != 0 {
		t.Fatalf("hold %v set from %d samples", time.Duration(got), tailSamples-1)
	}
}
