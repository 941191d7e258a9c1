package replica

import (
	"sync/atomic"
	"time"
)

// With Config.PublishLingerShare set, the publish hold (linger.go) is at
// most that share of the leader's recent commit p99: a hold adds to every
// held publish's confirm, and a bounded share of the tail publishers see
// anyway is a bounded cost. Where commits are quick (an idle, fast
// machine) the hold is then shorter than the gap between publishes and
// nothing is held; where they are slow, publishes share log writes, syncs
// and AppendEntries, which is what makes commits slow on a busy machine.
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
)

// commitTail keeps the commit latencies for the publish hold.
type commitTail struct {
	share float64 // of the p99; 0: not kept, the hold is the whole linger

	// The FSM goroutine's alone.
	start   time.Time // the window's
	counts  [tailBuckets]uint32
	samples int

	// wait is the hold the last window set (ns), read by proposePublish.
	wait atomic.Int64
}

// record counts an entry committed at now that took took from its
// append; at the end of a window with enough samples it sets the hold.
func (c *commitTail) record(took time.Duration, now time.Time) {
	c.counts[min(int(took/tailBucket), tailBuckets-1)]++
	c.samples++
	if c.start.IsZero() {
		c.start = now
	}
	if now.Sub(c.start) < tailWindow {
		return
	}
	if c.samples >= tailSamples {
		c.wait.Store(int64(float64(c.p99()) * c.share))
	}
	c.counts, c.samples, c.start = [tailBuckets]uint32{}, 0, now
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
