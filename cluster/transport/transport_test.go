package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/raftpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

func groupNames(n int) []string {
	gs := make([]string, n)
	for i := range gs {
		gs[i] = fmt.Sprintf("q%03d", i)
	}
	return gs
}

// 3 nodes, several groups: each elects a leader and replicates to all.
func TestReplicates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3, groupNames(4), nil)
	for _, g := range h.groups {
		h.apply(g, 50, 100)
	}
	for _, g := range h.groups {
		h.converged(g, 50)
	}
}

// A node stops: the groups it led elect a leader among the others and
// keep accepting commands.
func TestNodeFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3, groupNames(3), nil)
	for _, g := range h.groups {
		h.apply(g, 10, 10)
	}
	dead := h.leader(h.groups[0]) // the bootstrap node leads every group at first
	h.stop(dead)
	for _, g := range h.groups {
		if ld := h.leader(g); ld == dead {
			t.Fatalf("%s: stopped node still leads", g)
		}
		h.apply(g, 10, 10)
		h.converged(g, 20)
	}
}

// A follower misses more than the leader keeps in its log and catches up
// through InstallSnapshot, the snapshot larger than one stream chunk.
func TestInstallSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3, []string{"big"}, func(c *raft.Config) { c.TrailingLogs = 10 })
	h.apply("big", 5, 10)
	ld := h.leader("big")
	var follower *node
	for _, nd := range h.nodes {
		if nd != ld {
			follower = nd
		}
	}
	h.converged("big", 5)
	h.stop(follower)

	h.apply("big", 600, 1024) // ~600 KiB of state, over two chunks
	// Both members that stay compact their logs past the follower, so
	// that whichever leads when it returns (leadership may move on a
	// busy machine) can only catch it up with a snapshot.
	h.converged("big", 605)
	for _, nd := range h.nodes {
		if nd == follower {
			continue
		}
		if err := nd.member("big").raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		if first, _ := nd.member("big").logs.FirstIndex(); first <= 6 {
			t.Fatalf("%s: log not compacted past the follower: first index %d", nd.id, first)
		}
	}

	h.restart(follower)
	h.converged("big", 605)
	snaps, err := follower.member("big").snaps.List()
	if err != nil || len(snaps) == 0 {
		t.Fatalf("follower has no installed snapshot: %v %v", snaps, err)
	}
	if snaps[0].Size <= snapshotChunk {
		t.Fatalf("snapshot of %d bytes fits one chunk", snaps[0].Size)
	}
}

// LeadershipTransferToServer goes through TimeoutNow.
func TestLeadershipTransfer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3, []string{"q"}, nil)
	h.apply("q", 5, 10)
	ld := h.leader("q")
	var to *node
	for _, nd := range h.nodes {
		if nd != ld {
			to = nd
			break
		}
	}
	// A transfer may be refused while the target is catching up; retry.
	testwait.ForNil(t, 15*time.Second, "transfer to "+string(to.id), func() error {
		if h.leader("q") == to {
			return nil
		}
		r := h.leader("q").member("q").raft
		if err := r.LeadershipTransferToServer(to.id, raft.ServerAddress(to.addr)).Error(); err != nil {
			return err
		}
		if h.leader("q") != to {
			return errors.New("leader is elsewhere")
		}
		return nil
	})
	h.apply("q", 5, 10)
	h.converged("q", 10)
}

// The number of connections does not grow with the number of groups.
func TestConnectionsPerPeer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("300 rafts")
	}
	h := newHarness(t, 3, groupNames(100), func(c *raft.Config) {
		// 300 rafts on a small, shared machine under -race: calmer.
		c.HeartbeatTimeout = time.Second
		c.ElectionTimeout = time.Second
		c.LeaderLeaseTimeout = 500 * time.Millisecond
	})
	for _, g := range h.groups {
		h.leader(g)
	}
	for _, g := range h.groups {
		h.apply(g, 1, 10)
	}
	peers := len(h.nodes) - 1
	for _, nd := range h.nodes {
		if n := nd.pool.Len(); n > 2*peers {
			t.Errorf("%s holds %d connections for %d peers", nd.id, n, peers)
		}
	}
}

// Requests for a group the node does not carry fail at once with
// NotFound: never registered, or closed.
func TestUnknownGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3, []string{"q"}, nil)
	a, b := h.nodes[0], h.nodes[1]
	b.mux.groupWait.Store(int64(100 * time.Millisecond))

	if _, err := a.mux.Transport("q"); err == nil {
		t.Fatal("registered q twice")
	}

	cc, err := a.pool.Conn(b.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = raftpb.NewRaftClient(cc).AppendEntries(ctx, &raftpb.AppendEntriesRequest{Group: "nope", Term: 1})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("AppendEntries to an unknown group: %v", err)
	}

	// Through a Transport: a group registered only on a.
	lone, err := a.mux.Transport("lonely")
	if err != nil {
		t.Fatal(err)
	}
	defer lone.Close()
	var resp raft.RequestVoteResponse
	start := time.Now()
	err = lone.RequestVote(b.id, raft.ServerAddress(b.addr), &raft.RequestVoteRequest{Term: 1}, &resp)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("RequestVote to an unregistered group: %v", err)
	}
	if d := time.Since(start); d > rpcTimeout/2 {
		t.Fatalf("NotFound took %v", d)
	}
	if _, err := lone.AppendEntriesPipeline(b.id, raft.ServerAddress(b.addr)); err != nil {
		t.Fatal(err) // the stream opens; its first response fails
	}

	// A closed group is unknown too, and its name can be registered again.
	var back raft.RequestVoteResponse
	_ = b.member("q").trans.Close()
	err = a.member("q").trans.RequestVote(a.id, raft.ServerAddress(b.addr), &raft.RequestVoteRequest{Term: 1}, &back)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("RequestVote to a closed group: %v", err)
	}
	again, err := b.mux.Transport("q")
	if err != nil {
		t.Fatalf("register after close: %v", err)
	}
	_ = again.Close()
}

// raft's pipeline sends one batch (MaxAppendEntries) each time it is
// woken, by a new entry or by CommitTimeout, so a burst of entries that
// outruns its wake-ups leaves followers behind until the next one. With
// the group's leader appending a barrier when told a pipeline went idle
// behind its log (SetPipelineIdle, as raftq/replica does), the followers
// catch up with CommitTimeout at an hour; without it they stay behind
// (at a few dozen of 161 entries).
func TestIdlePipelineCatchesUp(t *testing.T) {
	t.Parallel()
	small := func(c *raft.Config) {
		c.MaxAppendEntries = 16
		c.BatchApplyCh = true
		c.CommitTimeout = time.Hour
		// Timeouts a machine running every package's tests under the
		// race detector does not trip: a leader change would start the
		// followers' replication over in raft's catch-up mode.
		c.HeartbeatTimeout = 2 * time.Second
		c.ElectionTimeout = 2 * time.Second
		c.LeaderLeaseTimeout = time.Second
	}
	h := newHarness(t, 3, []string{"burst"}, small)
	for _, nd := range h.nodes {
		m := nd.member("burst")
		r := m.raft
		m.trans.SetPipelineIdle(func(lastAcked uint64) {
			if r.State() == raft.Leader && r.LastIndex() > lastAcked {
				r.Barrier(0)
			}
		})
	}
	h.apply("burst", 1, 16) // the followers' pipelines are up
	r := h.leader("burst").member("burst").raft
	const burst = 160
	fs := make([]raft.ApplyFuture, burst)
	for i := range fs {
		fs[i] = r.Apply(binary.BigEndian.AppendUint64(nil, uint64(i)), 0)
	}
	// Committed, so on the leader and at least one follower. Without the
	// idle callback the followers never get past the first batches and
	// nothing commits.
	committed := make(chan error, 1)
	go func() {
		for _, f := range fs {
			if err := f.Error(); err != nil {
				committed <- err
				return
			}
		}
		committed <- nil
	}()
	select {
	case err := <-committed:
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the burst was not committed within 2 minutes")
	}
	// What the idle callback promises is the entries, not the commit
	// index: followers learn that with the next AppendEntries, which on
	// an idle group is CommitTimeout away when the last batch held no
	// barrier. So the check is every follower's log. Each batch after the
	// first waits out pipelineIdleGrace and a round trip: a couple of
	// seconds in all, more on a machine running every package's tests
	// under the race detector.
	last := fs[burst-1].Index()
	testwait.ForNil(t, 2*time.Minute, "every log holding the burst", func() error {
		for _, nd := range h.nodes {
			if got := nd.member("burst").raft.LastIndex(); got < last {
				return fmt.Errorf("%s holds up to %d of %d", nd.id, got, last)
			}
		}
		return nil
	})
	// And the entries are the leader's: a barrier carries the commit
	// index, and every member applies the same burst.
	if err := r.Barrier(0).Error(); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	h.convergedWithin("burst", 1+burst, 30*time.Second)
}

// RaiseTerm makes a candidate adopt the term and step down without
// voting, and a member that follows a leader ignores it. Long timeouts
// keep raft's own elections out of the way; Campaign elects.
func TestRaiseTerm(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3, []string{"q"}, func(c *raft.Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 30*time.Second, 30*time.Second, 30*time.Second
	})
	ctx := context.Background()
	if err := h.nodes[0].member("q").trans.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	h.apply("q", 3, 10)
	h.converged("q", 3)
	nd := h.nodes[2]
	m := nd.member("q")
	term := func() uint64 {
		n, _ := strconv.ParseUint(m.raft.Stats()["term"], 10, 64)
		return n
	}
	t0 := term()

	if err := m.trans.RaiseTerm(ctx, string(nd.id), t0+5); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.raft.LeaderWithID(); term() != t0 || got == "" {
		t.Fatalf("a follower of %q raised its term to %d (was %d)", got, term(), t0)
	}

	h.stop(h.nodes[0])
	h.stop(h.nodes[1])
	if err := m.trans.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	lastVote := func() uint64 {
		n, _ := m.logs.GetUint64([]byte("LastVoteTerm"))
		return n
	}
	// raft becomes a candidate before it moves to the new term and votes
	// for itself there.
	testwait.ForNil(t, 5*time.Second, "a candidate that voted for itself", func() error {
		if m.raft.State() != raft.Candidate {
			return errors.New(m.raft.State().String())
		}
		// (A vote at t0 is the one it gave the first leader.)
		if cur := term(); cur == t0 || lastVote() != cur {
			return fmt.Errorf("term %d, last vote at %d", cur, lastVote())
		}
		return nil
	})
	voted := term()
	if err := m.trans.RaiseTerm(ctx, string(nd.id), voted+10); err != nil {
		t.Fatal(err)
	}
	if st := m.raft.State(); st != raft.Follower || term() != voted+10 {
		t.Fatalf("after RaiseTerm(%d): %s at term %d", voted+10, st, term())
	}
	if last := lastVote(); last != voted {
		t.Fatalf("last vote at term %d, want %d (its own candidacy's)", last, voted)
	}
	if err := m.trans.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.ForNil(t, 5*time.Second, "a campaign above the raised term", func() error {
		if term() != voted+11 {
			return fmt.Errorf("term %d", term())
		}
		return nil
	})
}

// A follower that was down while entries were appended catches up as soon
// as it answers heartbeats again, though raft retries replication only on
// a new entry or after CommitTimeout (an hour here): the replication calls
// that failed to reach it marked it lagging, and the first heartbeat it
// answers asks the group for an entry (catchup.go). Without that it stays
// behind for the hour.
func TestLaggingFollowerNudgedWhenHeartbeatsResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3, []string{"lag"}, func(c *raft.Config) {
		c.CommitTimeout = time.Hour
		c.HeartbeatTimeout = 2 * time.Second
		c.ElectionTimeout = 2 * time.Second
		c.LeaderLeaseTimeout = time.Second
	})
	nudge := func(nd *node) {
		m := nd.member("lag")
		r := m.raft
		m.trans.SetPipelineIdle(func(lastAcked uint64) {
			if r.State() == raft.Leader && r.LastIndex() > lastAcked {
				r.Barrier(0)
			}
		})
	}
	for _, nd := range h.nodes {
		nudge(nd)
	}
	h.apply("lag", 5, 10)
	leader := h.leader("lag")
	follower := h.nodes[0]
	if follower == leader {
		follower = h.nodes[1]
	}
	h.stop(follower)
	h.apply("lag", 20, 10)
	// Long enough for raft's own retries of those entries (each one
	// backing off further) to have failed and stopped.
	time.Sleep(3 * time.Second)
	h.restart(follower)
	nudge(follower)
	last := leader.member("lag").raft.LastIndex()
	testwait.ForNil(t, 30*time.Second, "the restarted follower to hold the leader's log", func() error {
		if got := follower.member("lag").raft.LastIndex(); got < last {
			return fmt.Errorf("%s holds up to %d of %d", follower.id, got, last)
		}
		return nil
	})
}
