package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestDealsEveryFaultBeforeAnyAgain: however the seed falls, the first
// len(faults) faults dealt are every fault once, and so is the next round.
func TestDealsEveryFaultBeforeAnyAgain(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	names := []string{"kill", "stop", "pause", "alarm", "kill-minority", "kill-all"}
	for seed := uint64(0); seed < 20; seed++ {
		n, err := newNemesis(log, fakeCluster(3), &workload{}, "", seed, time.Second, names, nil)
		if err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 2; round++ {
			var dealt []string
			for range names {
				dealt = append(dealt, n.deal().name)
			}
			slices.Sort(dealt)
			want := slices.Sorted(slices.Values(names))
			if !slices.Equal(dealt, want) {
				t.Fatalf("seed %d round %d dealt %v, want each of %v once", seed, round, dealt, want)
			}
		}
	}
}

// TestUnappliedFaults: a fault given and never counted is named once.
func TestUnappliedFaults(t *testing.T) {
	got := unapplied([]string{"kill", "pause", "kill", "loss"}, map[string]int{"pause": 2})
	if !slices.Equal(got, []string{"kill", "loss"}) {
		t.Errorf("unapplied %v, want [kill loss]", got)
	}
}

// TestSmokeFaultsAreKnown: every smoke fault and operation is one the
// nemesis knows, and no fault is listed twice.
func TestSmokeFaultsAreKnown(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := fakeCluster(3)
	c.lab = &lab{}
	if _, err := newNemesis(log, c, &workload{}, "", 1, time.Second, smokeFaults, smokeOps); err != nil {
		t.Fatal(err)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(smokeFaults)))) != len(smokeFaults) {
		t.Errorf("a fault listed twice in %v", smokeFaults)
	}
}

// TestIdleWorkloads: a queue none of whose messages was delivered is idle,
// read from history.tsv as the run writes it.
func TestIdleWorkloads(t *testing.T) {
	dir := t.TempDir()
	h := newHistory(nil)
	id := h.publish("jepsen-0", "warren-0")
	h.publish("jepsen-sleepy-0", "warren-1")
	h.deliver(id, "jepsen-0", "warren-1", false)
	f, err := os.Create(filepath.Join(dir, "history.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.writeTSV(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := idleWorkloads(t, dir, "jepsen-0", "jepsen-sleepy-0", "jepsen-single-0")
	if !slices.Equal(got, []string{"jepsen-sleepy-0", "jepsen-single-0"}) {
		t.Errorf("idle %v, want [jepsen-sleepy-0 jepsen-single-0]", got)
	}
}
