package main

import (
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/cmd/warren-perf/internal/hist"
)

// Timestamps are wall-clock nanoseconds at process start plus monotonic time since then: they
// never jump with NTP during a run (latency stays correct), yet are close enough to real Unix
// time that a consumer in another process on the same host can still read them.
var (
	epochMono = time.Now()
	epochWall = epochMono.UnixNano()
)

// nowNanos is the timestamp written into messages and used for all latency measurements.
func nowNanos() int64 { return epochWall + int64(time.Since(epochMono)) }

// producerStats is written by one producer (and its confirm and return listeners) and read by
// the reporter. Each producer has its own, so the hot path never contends with other producers.
type producerStats struct {
	sent, confirmed, nacked, returned atomic.Int64
	lastSent, lastConfirm             atomic.Int64 // nowNanos of the latest event
	confirmLatency                    *hist.Histogram
}

func newProducerStats() *producerStats {
	return &producerStats{confirmLatency: hist.New()}
}

// consumerStats is written by one consumer goroutine and read by the reporter.
type consumerStats struct {
	received, stale atomic.Int64
	lastReceived    atomic.Int64
	e2eLatency      *hist.Histogram
}

func newConsumerStats() *consumerStats {
	return &consumerStats{e2eLatency: hist.New()}
}

// totals is a point-in-time sum over all producers and consumers.
type totals struct {
	sent, confirmed, nacked, returned, received, stale int64
	lastSent, lastConfirm, lastReceived                int64
}

func sumTotals(ps []*producerStats, cs []*consumerStats) totals {
	var t totals
	for _, p := range ps {
		t.sent += p.sent.Load()
		t.confirmed += p.confirmed.Load()
		t.nacked += p.nacked.Load()
		t.returned += p.returned.Load()
		t.lastSent = max(t.lastSent, p.lastSent.Load())
		t.lastConfirm = max(t.lastConfirm, p.lastConfirm.Load())
	}
	for _, c := range cs {
		t.received += c.received.Load()
		t.stale += c.stale.Load()
		t.lastReceived = max(t.lastReceived, c.lastReceived.Load())
	}
	return t
}

// confirmSnapshot merges every producer's confirm-latency histogram into s (which must be empty).
func confirmSnapshot(ps []*producerStats, s *hist.Snapshot) {
	for _, p := range ps {
		p.confirmLatency.AddTo(s)
	}
}

// e2eSnapshot merges every consumer's end-to-end latency histogram into s (which must be empty).
func e2eSnapshot(cs []*consumerStats, s *hist.Snapshot) {
	for _, c := range cs {
		c.e2eLatency.AddTo(s)
	}
}
