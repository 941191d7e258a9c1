package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestChaos is the smoke run (smokeConfig): 3 nodes, every workload, every
// fault and every operation for two and a half minutes, then the verdict.
// `make jepsen-smoke` runs it, and CI runs that: a run that fails is a
// defect in Warren or in the harness, never bad luck, and the seed it
// prints repeats its schedule with `go run ./jepsen`. `make jepsen` runs
// the harness for longer.
//
// It runs only with WARREN_CHAOS_TESTS set: to 1, leaving out the faults
// that cut links where this machine cannot (root, ip, nft, iptables), or
// to require (make jepsen-smoke), failing then instead.
func TestChaos(t *testing.T) {
	mode := os.Getenv("WARREN_CHAOS_TESTS")
	if testing.Short() || mode == "" {
		t.Skip("chaos run of a process cluster: WARREN_CHAOS_TESTS=1 (make jepsen-smoke)")
	}
	bin := buildBinaries(t)
	faults := smokeFaults
	if why := labAvailable(); why != "" {
		if mode == "require" {
			t.Fatalf("the faults that cut links: %s", why)
		}
		faults = slices.DeleteFunc(slices.Clone(faults), needsLab)
		t.Logf("no faults that cut links: %s", why)
	}
	cfg := smokeConfig(filepath.Join(bin, "warren"), filepath.Join(bin, "warrenctl"), runDir(t), uint64(time.Now().UnixNano()), faults)
	t.Logf("the same schedule again: go run ./jepsen %s", cfg.repeatFlags())
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	v, err := run(context.Background(), log, cfg)
	if err != nil {
		t.Fatalf("run: %v (nodes' logs under %s)", err, cfg.dir)
	}
	t.Logf("\n%s", v)
	if !v.ok() {
		t.Fatalf("the history shows a defect or could not be observed whole (nodes' logs and report.json under %s)", cfg.dir)
	}
	if v.RPC == nil || v.RPC.Answered == 0 {
		t.Fatalf("no request answered: the run tested nothing of request/reply")
	}
	for _, idle := range idleWorkloads(t, cfg.dir, "jepsen-0", "jepsen-expiring-0", "jepsen-sleepy-0", "jepsen-single-0") {
		t.Errorf("no message published to %s was delivered: the run tested nothing of its workload", idle)
	}
}

// idleWorkloads are the queues of those given that no delivered message
// was published to, as the run's history.tsv tells.
func idleWorkloads(t *testing.T, dir string, queues ...string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "history.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	delivered := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// id, queue, via, published, confirmed, deliveries
		if f := strings.Split(line, "\t"); len(f) == 6 && f[5] != "" {
			delivered[f[1]] = true
		}
	}
	var idle []string
	for _, q := range queues {
		if !delivered[q] {
			idle = append(idle, q)
		}
	}
	return idle
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
