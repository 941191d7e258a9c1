package replica

import (
	"sync/atomic"
	"time"
)

// With Config.PublishLingerShare set, the publish hold (linger.go) is
// gated and bounded by the leader's recent commit p99: publishes are held
// only while the linger is at most that share of the p99, and never for
// longer than the share. A hold adds to every held publish's confirm;
// where commits are quick (a fast disk, a quiet machine) it would be most
// of the tail publishers see, so nothing is held, and where commits are
// slow the tail hides it while the shared log writes, syncs and
// AppendEntries take a third or more off the CPU a message costs (slow
// syncs are what a busy machine has). With the defaults (2 ms, 0.5),
// holds start once the commit p99 reaches 4 ms; once holding, they go on
// down to three quarters of that (tailHysteresis), so that a p99 near the
// line does not switch them every second.
//
// The times are the commit latency the FSM already takes of each entry
// this member appended as leader (from raft's append to the apply: the
// hold excluded), counted into a histogram of tailBuckets of tailBucket
// each; every tailWindow the p99 of the window sets the hold.
const (
	tailBucket  = 250 * time.Microsecond
	tailBuckets = 64 // the last counts everything from 15.75 ms on
	tailWindow  = time.Second
	// tailSamples is the fewest samples a window needs to move the hold.
	tailSamples = 50
	// tailHysteresis is the share of the p99 that started the holds
	// below which they stop.
	tailHysteresis = 0.75
)

// commitTail keeps the commit latencies for the publish hold.
type commitTail struct {
	share  float64       // of the p99; 0: not kept, the hold is the whole linger
	linger time.Duration // the longest hold (Config.PublishLinger)

	// The FSM goroutine's alone.
	start   time.Time // the window's
	counts  [tailBuckets]uint32
	samples int
	holding bool // the last window set a hold

	// wait is the hold the last window set (ns), read by proposePublish.
	wait atomic.Int64
}

// record counts an entry committed at now that took took from its
// append; at the end of a window with enough samples it sets the hold,
// and says so with the window's p99 when the holds start or stop.
func (c *commitTail) record(took time.Duration, now time.Time) (switched bool, p99 time.Duration) {
	c.counts[min(int(took/tailBucket), tailBuckets-1)]++
	c.samples++
	if c.start.IsZero() {
		c.start = now
	}
	if now.Sub(c.start) < tailWindow {
		return false, 0
	}
	if c.samples >= tailSamples {
		was := c.holding
		p99 = c.p99()
		c.wait.Store(int64(c.hold(p99)))
		switched = c.holding != was
	}
	c.counts, c.samples, c.start = [tailBuckets]uint32{}, 0, now
	return switched, p99
}

// hold is the publish hold after a window whose commit p99 was p99: at
// most share of it, and nothing unless that reaches the whole linger (or,
// while holding, tailHysteresis of it).
func (c *commitTail) hold(p99 time.Duration) time.Duration {
	reach := time.Duration(float64(p99) * c.share)
	gate := c.linger
	if c.holding {
		gate = time.Duration(float64(c.linger) * tailHysteresis)
	}
	c.holding = reach >= gate
	if !c.holding {
		return 0
	}
	return min(reach, c.linger)
}

// p99 is the upper bound of the bucket holding the window's 99th
// percentile.
func (c *commitTail) p99() time.Duration {
	need := (c.samples*99 + 99) / 100
	seen := 0
	for i, n := range c.counts {
		if seen += int(n); seen >= need {
			return time.Duration(i+1) * tailBucket
		}
	}
	return tailBuckets * tailBucket
}

// commitTook counts, for the publish hold, an entry this member appended
// as leader that committed at now, took after its append. FSM goroutine.
func (p *publishes) commitTook(took time.Duration, now time.Time) {
	if p.tail.share <= 0 {
		return
	}
	if switched, p99 := p.tail.record(took, now); switched {
		p.core.log.Debug("publish hold", "holding", p.tail.holding, "commit_p99", p99,
			"hold", time.Duration(p.tail.wait.Load()))
	}
}
