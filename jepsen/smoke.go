package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// smokeFaults are the faults of the smoke run (TestChaos, `make
// jepsen-smoke`, which CI runs): all of them. A new fault joins the smoke
// run by its name here.
var smokeFaults = []string{
	"kill", "stop", "pause", "alarm", "kill-minority", "kill-all", "corrupt",
	"partition", "halves", "ring", "bridge", "oneway", "loss", "latency",
}

// smokeOps are the operator commands of the smoke run: all but member.
// Deleting a member and adding it back leaves a queue two voters for a
// while; the corrupt fault on one of them then leaves it without a
// majority until that member re-syncs, which it cannot do without one:
// Raft's limit (docs/storage.md), not a defect. The full campaign runs
// both.
var smokeOps = []string{"rebalance", "transfer", "drain", "checkpoint"}

// smokeConfig is the smoke run: 3 nodes, every workload and every fault
// and operation, short enough for CI. Holds of 4 s let the nemesis deal
// every fault at least once in the duration; faults is smokeFaults, less
// those this machine cannot make when the caller says so.
func smokeConfig(warren, warrenctl, dir string, seed uint64, faults []string) config {
	return config{
		warren: warren, warrenctl: warrenctl, dir: dir,
		nodes: 3, queues: 3, deadLetter: 1, sleepy: 2, single: 1,
		ordered: 1, large: 1, crashEvery: 2 * time.Second, minFaults: -1,
		rate: 50, rpcRate: 10,
		duration: 180 * time.Second, hold: 4 * time.Second,
		faults: faults, ops: smokeOps, everyFault: true,
		seed: seed, drainLimit: 2 * time.Minute,
	}
}

// repeatFlags are the command-line flags that make the same run with `go
// run ./jepsen` (binaries and directory aside): the way to repeat a seed.
func (c config) repeatFlags() string {
	return fmt.Sprintf("--nodes %d --queues %d --dead-letter-queues %d --sleepy-queues %d --single-active-queues %d --ordered-queues %d --large-queues %d --crash-every %s --rate %d --rpc-rate %d --duration %s --hold %s --faults %s --ops %s --drain-limit %s --seed %d",
		c.nodes, c.queues, c.deadLetter, c.sleepy, c.single, c.ordered, c.large, c.crashEvery, c.rate, c.rpcRate, c.duration, c.hold,
		strings.Join(c.faults, ","), strings.Join(c.ops, ","), c.drainLimit, c.seed)
}

// unapplied are the faults a run was given but never applied (never
// dealt, or failed each time): a run that passes proves nothing of them.
func unapplied(faults []string, counts map[string]int) []string {
	var out []string
	for _, f := range faults {
		if counts[f] == 0 && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}
