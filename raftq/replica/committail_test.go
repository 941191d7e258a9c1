package replica

import (
	"testing"
	"time"
)

// commitOnce times one publish proposed at at and committed took later.
func commitOnce(t *testing.T, c *commitTail, k pendingKey, at time.Time, took time.Duration) {
	t.Helper()
	c.propose(k, at)
	if !c.timing(k) {
		t.Fatalf("publish %v proposed while none was timed is not timed", k)
	}
	c.record(at.Add(took))
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
		commitOnce(t, c, pendingKey{1, uint64(i + 1)}, at, took)
		if c.wait.Load() != 0 {
			t.Fatalf("hold set after %d samples, before the window passed", i+1)
		}
		at = at.Add(4 * time.Millisecond)
	}
	// The window closes with the first commit a second after it opened.
	commitOnce(t, c, pendingKey{1, 201}, t0.Add(tailWindow), time.Millisecond)
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
		commitOnce(t, c, pendingKey{1, uint64(300 + i)}, at, took)
		at = at.Add(5 * time.Millisecond)
	}
	commitOnce(t, c, pendingKey{1, 400}, at.Add(tailWindow), time.Millisecond)
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
		commitOnce(t, c, pendingKey{1, uint64(i + 1)}, t0.Add(time.Duration(i)*10*time.Millisecond), 40*time.Millisecond)
	}
	commitOnce(t, c, pendingKey{1, 1000}, t0.Add(2*tailWindow), 40*time.Millisecond)
	if got := c.wait.Load(); got != 0 {
		t.Fatalf("hold %v set from %d samples", time.Duration(got), tailSamples-1)
	}
}

// One publish is timed at a time; another's commit does not end it, and
// forget (a leadership loss) drops it.
func TestCommitTailTimesOneAtATime(t *testing.T) {
	c := &commitTail{share: 0.25}
	t0 := time.Unix(1000, 0)
	c.propose(pendingKey{1, 1}, t0)
	c.propose(pendingKey{1, 2}, t0.Add(time.Millisecond))
	if c.timing(pendingKey{1, 2}) || !c.timing(pendingKey{1, 1}) {
		t.Fatal("a second publish replaced the one being timed")
	}
	c.forget()
	if c.timing(pendingKey{1, 1}) {
		t.Fatal("still timing after forget")
	}
	c.propose(pendingKey{2, 1}, t0)
	if !c.timing(pendingKey{2, 1}) || c.timing(pendingKey{1, 1}) {
		t.Fatal("after forget, the next publish is not the one timed")
	}
	off := &commitTail{}
	off.propose(pendingKey{1, 1}, t0)
	if off.timing(pendingKey{1, 1}) {
		t.Fatal("timed with no share set")
	}
}
