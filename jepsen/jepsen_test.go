package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestChaos runs the harness briefly against real processes: every fault
// (partitions where this machine can make them) and every operation, then
// judges the history. `make jepsen` runs it for longer.
//
// It runs only with WARREN_CHAOS_TESTS=1 (`make test-chaos`), not in
// `make test` or CI: it still finds a defect now and then (jepsen/README.md's
// "Open findings"), and CI must not pass or fail on a dice roll. Twelve
// clean runs in a row were once followed by a CI run that found a
// cancelled consumer's delivery stranded when its node stopped (since
// mended); it moves into CI once it passes many more.
func TestChaos(t *testing.T) {
	if testing.Short() || os.Getenv("WARREN_CHAOS_TESTS") == "" {
		t.Skip("chaos run of a process cluster: WARREN_CHAOS_TESTS=1 (make test-chaos)")
	}
	bin := buildBinaries(t)
	faults := []string{"kill", "stop", "pause", "alarm"}
	if why := labAvailable(); why == "" {
		faults = append(faults, "partition")
	} else {
		t.Logf("no partitions: %s", why)
	}
	seed := uint64(time.Now().UnixNano())
	cfg := config{
		warren: filepath.Join(bin, "warren"), warrenctl: filepath.Join(bin, "warrenctl"),
		dir: runDir(t), nodes: 3, queues: 3, deadLetter: 1, rate: 50,
		ordered: 1, large: 1, crashEvery: 2 * time.Second, minFaults: -1,
		duration: 30 * time.Second, hold: 5 * time.Second,
		faults: faults, ops: []string{"rebalance", "transfer", "drain", "member", "checkpoint"},
		seed: seed, drainLimit: 2 * time.Minute,
	}
	t.Logf("seed %d (go run ./jepsen --seed %d repeats the schedule)", seed, seed)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	v, err := run(context.Background(), log, cfg)
	if err != nil {
		t.Fatalf("run: %v (nodes' logs under %s)", err, cfg.dir)
	}
	t.Logf("\n%s", v)
	if !v.ok() {
		t.Fatalf("the history shows a defect (nodes' logs and report.json under %s)", cfg.dir)
	}
	if v.Confirmed == 0 || v.Delivered == 0 {
		t.Fatalf("nothing confirmed or delivered: the run tested nothing")
	}
}

// buildBinaries builds warren and warrenctl into a temporary directory
// and returns it.
func buildBinaries(t *testing.T) string {
	bin := t.TempDir()
	for _, cmd := range []string{"warren", "warrenctl"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, cmd), "github.com/warrenmq/warren/cmd/"+cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
	return bin
}

// runDir is the run's directory, removed afterwards unless the test
// failed: the nodes' logs are then the post-mortem.
func runDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "warren-jepsen-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	return dir
}

// testWriter sends the harness's log to the test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
