package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestWorkloadsAgainstANode runs the crashing consumer, the multi-frame
// bodies and the ordered queue against a real node, without faults: every
// message a crashing consumer held comes back flagged redelivered, every
// multi-frame body arrives intact, first deliveries keep their order, and
// the history is clean. It needs the binaries built, so it runs with the
// chaos tests (WARREN_CHAOS_TESTS=1).
func TestWorkloadsAgainstANode(t *testing.T) {
	if testing.Short() || os.Getenv("WARREN_CHAOS_TESTS") == "" {
		t.Skip("a process node: WARREN_CHAOS_TESTS=1 (make test-chaos)")
	}
	bin := buildBinaries(t)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dir := runDir(t)
	c, err := startCluster(log, filepath.Join(bin, "warren"), filepath.Join(bin, "warrenctl"), dir, 1, nil, nil)
	if err != nil {
		t.Fatalf("start a node: %v (its log under %s)", err, dir)
	}
	defer c.stopAll()
	w := &workload{log: log, rate: 60, h: newHistory(nil),
		queues: []string{"jepsen-0"}, ordered: []string{"jepsen-ordered-0"}, large: []string{"jepsen-large-0"}}
	w.h.expect = w.expectations(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := w.declare(ctx, c); err != nil {
		t.Fatal(err)
	}
	nd := c.nodes[0]
	consumeCtx, stopConsumers := context.WithCancel(ctx)
	runCtx, stopRun := context.WithTimeout(ctx, 8*time.Second)
	defer stopRun()
	var consumers, producers sync.WaitGroup
	consumers.Add(1)
	go func() { defer consumers.Done(); w.consume(consumeCtx, nd) }()
	producers.Add(2)
	go func() { defer producers.Done(); w.produce(runCtx, nd, w.producedBy(0, 1)) }()
	go func() { defer producers.Done(); w.crashing(runCtx, nd, 300*time.Millisecond, 1) }()
	producers.Wait()
	drainErr := drain(ctx, c, w, time.Minute)
	stopConsumers()
	consumers.Wait()
	if drainErr != nil {
		t.Fatal(drainErr)
	}
	v := w.h.check()
	t.Logf("\n%s", v)
	if !v.ok() {
		t.Fatalf("the history shows a defect or a workload without a trace (the node's log under %s)", dir)
	}
	e := v.Exercised
	if e.Abandoned < 5 || e.AbandonedBack != e.Abandoned || e.Large < 20 || e.Ordered < 20 {
		t.Errorf("exercised %+v: want messages held by dropped consumers, every one back flagged, and multi-frame and ordered traffic", e)
	}
}
