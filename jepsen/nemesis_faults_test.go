package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func fakeCluster(n int) *cluster {
	c := &cluster{}
	for i := 0; i < n; i++ {
		c.nodes = append(c.nodes, &node{name: "warren-" + string(rune('0'+i))})
	}
	return c
}

// TestFaultsNeedingNamespaces: the network faults refuse to run without
// namespaces, and an unknown fault names the known ones.
func TestFaultsNeedingNamespaces(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, f := range []string{"partition", "halves", "ring", "bridge", "oneway", "loss", "latency"} {
		if _, err := newNemesis(log, fakeCluster(3), &workload{}, "", 1, time.Second, []string{f}, nil); err == nil || !strings.Contains(err.Error(), "namespaces") {
			t.Errorf("%s without a lab: %v", f, err)
		}
	}
	if _, err := newNemesis(log, fakeCluster(3), &workload{}, "", 1, time.Second, []string{"kill", "stop", "pause", "alarm", "kill-minority", "kill-all", "full-disk"}, nil); err != nil {
		t.Errorf("process faults: %v", err)
	}
	if _, err := newNemesis(log, fakeCluster(3), &workload{}, "", 1, time.Second, []string{"melt"}, nil); err == nil || !strings.Contains(err.Error(), "kill-all") {
		t.Errorf("unknown fault: %v", err)
	}
}

// TestInflictRecordsAndCounts: every fault is recorded with its kind,
// nodes, shape, start and end; only those applied are counted.
func TestInflictRecordsAndCounts(t *testing.T) {
	n := &nemesis{log: slog.New(slog.NewTextHandler(io.Discard, nil)), c: fakeCluster(3), rng: seeded(1), hold: 2 * time.Millisecond, counts: map[string]int{}}
	healed := 0
	ok := fault{name: "halves", apply: func(context.Context) ([]int, string, func() error, error) {
		return []int{0, 2}, "[warren-0] [warren-1 warren-2]", func() error { healed++; return nil }, nil
	}}
	bad := fault{name: "oneway", apply: func(context.Context) ([]int, string, func() error, error) {
		return []int{1}, "", func() error { healed++; return nil }, errors.New("nft failed")
	}}
	n.faults = []fault{ok, bad}
	n.inflict(context.Background(), ok)
	n.inflict(context.Background(), bad)
	if healed != 2 {
		t.Errorf("healed %d times, want 2 (a failed fault is healed too)", healed)
	}
	if len(n.records) != 2 {
		t.Fatalf("records %v", n.records)
	}
	r := n.records[0]
	if r.Kind != "halves" || strings.Join(r.Nodes, ",") != "warren-0,warren-2" || r.Shape == "" || r.Error != "" || !r.End.After(r.Start) {
		t.Errorf("record %+v", r)
	}
	if n.records[1].Error != "nft failed" {
		t.Errorf("failed record %+v", n.records[1])
	}
	if got := n.countLine(); got != "halves 1, oneway 0" {
		t.Errorf("counts %q", got)
	}
}
