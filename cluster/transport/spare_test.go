package transport

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// spareHarness starts a group of n members that hold entries for spare
// followers up to delay, and returns it with its leader.
func spareHarness(t *testing.T, n int, delay time.Duration) (*harness, string, *node) {
	t.Helper()
	h := newHarness(t, n, groupNames(1), nil)
	g := h.groups[0]
	for _, nd := range h.nodes {
		nd.member(g).trans.SetSpareDelay(delay)
	}
	ld := h.leader(g)
	h.apply(g, 1, 10)
	return h, g, ld
}

// commitOne applies one command through ld and returns how long its
// commit took.
func commitOne(t *testing.T, ld *node, g string, i int) time.Duration {
	t.Helper()
	start := time.Now()
	if err := ld.member(g).raft.Apply([]byte(fmt.Sprint(i)), 5*time.Second).Error(); err != nil {
		t.Fatalf("apply %d: %v", i, err)
	}
	return time.Since(start)
}

// followers are the group's members other than ld's.
func followers(h *harness, ld *node) []*node {
	var out []*node
	for _, nd := range h.nodes {
		if nd != ld {
			out = append(out, nd)
		}
	}
	return out
}

// The followers a majority does not need (one of three, two of five) get
// their entries in batches while the commits go on at the others' pace:
// sampled 20 ms after each commit, the spares are behind the leader most
// of the time and the eager followers hardly ever, and no commit waits
// for the spares' delay. With no delay, every follower keeps up.
func TestSpareFollowerGetsBatches(t *testing.T) {
	t.Parallel()
	for _, members := range []int{3, 5} {
		for _, delay := range []time.Duration{0, 150 * time.Millisecond} {
			t.Run(fmt.Sprintf("%d members, %v", members, delay), func(t *testing.T) {
				t.Parallel()
				spareBatches(t, members, delay)
			})
		}
	}
}

func spareBatches(t *testing.T, members int, delay time.Duration) {
	h, g, ld := spareHarness(t, members, delay)
	fs := followers(h, ld)
	behind := make([]int, len(fs))
	var slow int
	const n = 30
	for i := range n {
		if d := commitOne(t, ld, g, i); d > delay/2 && delay > 0 {
			slow++
		}
		time.Sleep(20 * time.Millisecond) // the followers' moment to catch up, as between a client's publishes
		last := ld.member(g).raft.LastIndex()
		for j, f := range fs {
			if f.member(g).raft.LastIndex() < last {
				behind[j]++
			}
		}
	}
	t.Logf("followers behind in %v of %d samples, %d commits slower than half the delay", behind, n, slow)
	sorted := slices.Sorted(slices.Values(behind))
	spares := len(fs) - members/2 // followers beyond the majority
	if delay == 0 {
		if sorted[len(sorted)-1] > n/3 {
			t.Fatalf("without a delay a follower was behind in %d of %d samples", sorted[len(sorted)-1], n)
		}
		return
	}
	eager, spare := sorted[:len(fs)-spares], sorted[len(fs)-spares:]
	if spare[0] < n/2 || eager[len(eager)-1] > n/5 {
		t.Fatalf("followers behind in %v of %d samples: want %d (the spares) in most, the others in few", behind, n, spares)
	}
	if slow > n/5 {
		t.Fatalf("%d of %d commits took over half the spare delay: they waited for a spare", slow, n)
	}
	h.converged(g, n+1)
}

// The eager follower fails, by its node stopping (its connection
// refused at once) or by its disk stalling (its requests unanswered on a
// live connection): commits wait for the spare only until the eager
// follower's pipeline failed or kept a request unanswered past its
// patience, and then go at the spare's pace, without its delay.
func TestSpareTakesOverFromFailedEager(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"stop", "stall"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			spareTakesOver(t, fault)
		})
	}
}

func spareTakesOver(t *testing.T, fault string) {
	const delay = 200 * time.Millisecond
	h, g, ld := spareHarness(t, 3, delay)
	fs := followers(h, ld)
	eager := fs[0]
	if spareRank(g, raft.ServerAddress(fs[1].addr)) < spareRank(g, raft.ServerAddress(eager.addr)) {
		eager = fs[1]
	}
	for i := range 5 {
		commitOne(t, ld, g, i)
	}
	switch fault {
	case "stop":
		h.stop(eager)
	case "stall":
		m := eager.member(g)
		m.stalled.Store(true)
		t.Cleanup(func() { m.stalled.Store(false) }) // before the harness stops it
	}
	if h.leader(g) != ld {
		t.Skip("leadership moved when the follower failed")
	}
	const n = 20
	start := time.Now()
	for i := range n {
		commitOne(t, ld, g, 100+i)
	}
	took := time.Since(start)
	t.Logf("%d commits with the eager follower failed (%s): %v", n, fault, took)
	// Held for the spare, each would take up to the delay: n × delay = 4 s.
	if limit := eagerPatience(delay) + delay + n*delay/4; took > limit {
		t.Fatalf("%d commits took %v (limit %v): the spare kept its delay with the eager follower gone", n, took, limit)
	}
}
