package replica

import (
	"sync"
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
// One publish at a time is timed, from its proposal to its commit (the
// hold excluded), into a histogram of tailBuckets of tailBucket each;
// every tailWindow the p99 of the samples sets the hold.
const (
	tailBucket  = 250 * time.Microsecond
	tailBuckets = 64 // the last counts everything from 15.75 ms on
	tailWindow  = time.Second
	// tailSamples is the fewest samples a window needs to move the hold.
	tailSamples = 50
)

// commitTail times commits for the publish hold.
type commitTail struct {
	share float64 // of the p99; 0: the hold is the whole linger

	// The publish being timed: its key and proposal time (Unix ns; 0 if
	// none). Set under pubMu, taken at its commit.
	probing   atomic.Bool
	publisher atomic.Uint64
	seq       atomic.Uint64
	at        atomic.Int64

	mu      sync.Mutex
	start   time.Time // the window's
	counts  [tailBuckets]uint32
	samples int

	// wait is the hold the last window set (ns), read by proposePublish.
	wait atomic.Int64
}

// propose starts timing the publish k proposed now, unless one is being
// timed.
func (c *commitTail) propose(k pendingKey, now time.Time) {
	if c.share == 0 || c.probing.Load() {
		return
	}
	c.publisher.Store(k.publisher)
	c.seq.Store(k.seq)
	c.at.Store(now.UnixNano())
	c.probing.Store(true)
}

// committed records the commit of publish k, if it is the one timed.
func (c *commitTail) committed(k pendingKey) {
	if c.timing(k) {
		c.record(time.Now())
	}
}

// timing reports whether publish k is the one being timed.
func (c *commitTail) timing(k pendingKey) bool {
	return c.probing.Load() && c.seq.Load() == k.seq && c.publisher.Load() == k.publisher
}

// record ends the timing at now, the commit of the publish timed.
func (c *commitTail) record(now time.Time) {
	took := now.Sub(time.Unix(0, c.at.Load()))
	c.probing.Store(false)
	c.mu.Lock()
	defer c.mu.Unlock()
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

// forget drops the publish being timed: it was answered without a commit
// (this member stopped leading).
func (c *commitTail) forget() { c.probing.Store(false) }

// p99 is the upper bound of the bucket holding the window's 99th
// percentile; mu held.
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
