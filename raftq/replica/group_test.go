package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

// group is a three-member queue group in one process, its members joined
// by raft's in-memory transport (the gRPC transport is tested on its own).
type group struct {
	t       *testing.T
	names   []string
	dirs    map[string]string
	trans   map[string]*raft.InmemTransport
	members map[string]*Replica
	// nodes are the members' log storages (nil: a log per queue).
	nodes map[string]*testNode
	// configure, if set, adjusts each member's config before it opens.
	configure func(n string, cfg *Config)
}

func newGroup(t *testing.T, st storage) *group { return newGroupWith(t, st, nil) }

// newGroupWith is newGroup with configure applied to each member's config.
func newGroupWith(t *testing.T, st storage, configure func(n string, cfg *Config)) *group {
	g := &group{t: t, names: []string{"a", "b", "c"}, dirs: map[string]string{}, trans: map[string]*raft.InmemTransport{}, members: map[string]*Replica{}, nodes: map[string]*testNode{}, configure: configure}
	for _, n := range g.names {
		g.dirs[n] = t.TempDir()
		g.nodes[n] = st.node(t)
	}
	for i, n := range g.names {
		g.start(n, i == 0)
	}
	t.Cleanup(func() {
		for _, r := range g.members {
			r.Close()
		}
	})
	return g
}

// start opens member n with a fresh transport connected to the others.
func (g *group) start(n string, bootstrap bool) {
	_, tr := raft.NewInmemTransport(raft.ServerAddress(n))
	g.trans[n] = tr
	for m, other := range g.trans {
		if m != n {
			tr.Connect(raft.ServerAddress(m), other)
			other.Connect(raft.ServerAddress(n), tr)
		}
	}
	var peers []Peer
	for _, m := range g.names {
		peers = append(peers, Peer{ID: m, Addr: m})
	}
	cfg := Config{
		Name: "test/q", Dir: g.dirs[n], NodeID: n, Created: 1,
		Transport: tr, Peers: peers, Bootstrap: bootstrap,
		HeartbeatTimeout: 400 * time.Millisecond, ElectionTimeout: 400 * time.Millisecond, // a lease (half) that survives -race on two busy cores
		Log: testLog(n),
	}
	g.nodes[n].configure(&cfg)
	if g.configure != nil {
		g.configure(n, &cfg)
	}
	r, err := Open(cfg)
	if err != nil {
		g.t.Fatalf("open %s: %v", n, err)
	}
	g.members[n] = r
}

// stop closes member n and cuts it off; its node's shared log, if any,
// is closed and reopened, as by a node restart.
func (g *group) stop(n string) {
	g.members[n].Close()
	g.nodes[n].restart(g.t)
	delete(g.members, n)
	for m, other := range g.trans {
		if m != n {
			other.Disconnect(raft.ServerAddress(n))
		}
	}
	delete(g.trans, n)
}

// leader waits for a member that leads and has taken over (onLeading ran).
func (g *group) leader() (string, *Replica) {
	g.t.Helper()
	var name string
	var lead *Replica
	testwait.For(g.t, 15*time.Second, "a member that leads and has taken over", func() bool {
		for n, r := range g.members {
			if r.IsLeader() && r.Leader() == n {
				name, lead = n, r
				return true
			}
		}
		return false
	})
	return name, lead
}

// passToLeader is a Config.SettleAtLeader that hands settlements to the
// group's leader until it takes them, as the router does; *g is set once
// the group is made.
func passToLeader(t *testing.T, g **group) func([]HeldSettlement) {
	return func(list []HeldSettlement) {
		go func() {
			if !testwait.Until(10*time.Second, func() bool {
				_, lead := (*g).leader()
				return lead.SettleHeld(list) == nil
			}) {
				t.Errorf("no leader took %v", list)
			}
		}()
	}
}

// movable is a consumer that records deliveries and leadership losses.
type movable struct {
	fakeConsumer
	lost chan struct{}
}

func (m *movable) LeaderLost() { m.lost <- struct{}{} }

func publish(t *testing.T, r *Replica, from, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := from; i < from+n; i++ {
		wg.Add(1)
		msg := &queue.Message{RoutingKey: "q", Body: []byte(fmt.Sprintf("m%d", i))}
		r.Enqueue(context.Background(), msg, func(err error) {
			if err != nil {
				errs <- err
			}
			wg.Done()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("publish: %v", err)
	}
}

// TestGroupFailover: confirmed messages survive the leader's loss, and
// the ones a consumer held through it come back, marked redelivered, to
// the consumer once it attaches to the new leader.
func TestGroupFailover(t *testing.T) { eachStorage(t, testGroupFailover) }

func testGroupFailover(t *testing.T, st storage) {
	g := newGroup(t, st)
	name, lead := g.leader()
	if name != "a" {
		t.Fatalf("leader %s, want the bootstrapping member a", name)
	}
	publish(t, lead, 0, 100)
	for _, r := range g.members {
		testwait.For(t, 20*time.Second, "followers to apply", func() bool { return r.Stats().Ready == 100 })
	}

	c := &movable{lost: make(chan struct{}, 1)}
	if err := lead.Consume(c, queue.ConsumeOptions{Prefetch: 10}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "10 deliveries", func() bool { return len(c.ids()) == 10 })
	lead.Settle(c.ids()[:5]) // five acked; the credit they free brings five more
	testwait.For(t, 20*time.Second, "15 deliveries", func() bool { return len(c.ids()) == 15 })
	testwait.For(t, 20*time.Second, "acks applied on followers", func() bool { return g.members["b"].Stats().Ready+g.members["b"].Stats().Unacked == 95 })

	g.stop(name)
	_, lead = g.leader()
	if err := lead.EnqueueAs(context.Background(), &queue.Message{Body: []byte("x")}, 7, 1, nil); err != nil {
		t.Fatal(err)
	}
	c2 := &fakeConsumer{}
	if err := lead.Consume(c2, queue.ConsumeOptions{Prefetch: 200}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "96 deliveries from the new leader", func() bool { return len(c2.ids()) == 96 })
	c2.mu.Lock()
	redelivered := 0
	for _, d := range c2.got {
		if d.Redelivered {
			redelivered++
		}
	}
	c2.mu.Unlock()
	if redelivered != 10 {
		t.Fatalf("redelivered %d, want the 10 held through the failover", redelivered)
	}
}

// TestGroupForwardedPublishDedup: a forwarded publish sent again (as after
// a leader change) is stored once and confirmed both times.
func TestGroupForwardedPublishDedup(t *testing.T) { eachStorage(t, testGroupForwardedPublishDedup) }

func testGroupForwardedPublishDedup(t *testing.T, st storage) {
	g := newGroup(t, st)
	_, lead := g.leader()
	done := make(chan error, 3)
	cb := func(err error) { done <- err }
	m := &queue.Message{Body: []byte("once")}
	lead.EnqueueAs(context.Background(), m, 42, 1, cb)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lead.EnqueueAs(context.Background(), m, 42, 1, cb)
	if err := <-done; err != nil {
		t.Fatalf("re-sent publish: %v", err)
	}
	lead.EnqueueAs(context.Background(), m, 42, 3, cb)
	if err := <-done; err != ErrOutOfSequence {
		t.Fatalf("skipping publish: %v, want ErrOutOfSequence", err)
	}
	if st := lead.Stats(); st.Ready != 1 {
		t.Fatalf("ready %d, want 1", st.Ready)
	}
}

// TestGroupMovableLeaderLost: when the member a consumer is attached to
// stops leading (leadership moves), a movable consumer hears LeaderLost.
func TestGroupMovableLeaderLost(t *testing.T) { eachStorage(t, testGroupMovableLeaderLost) }

func testGroupMovableLeaderLost(t *testing.T, st storage) {
	g := newGroup(t, st)
	_, lead := g.leader()
	c := &movable{lost: make(chan struct{}, 1)}
	if err := lead.Consume(c, queue.ConsumeOptions{Prefetch: 10}); err != nil {
		t.Fatal(err)
	}
	if err := lead.raft.LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.lost:
	case <-time.After(10 * time.Second):
		t.Fatal("no LeaderLost after the leadership moved")
	}
	if err := lead.Enqueue(context.Background(), &queue.Message{Body: []byte("x")}, nil); err != ErrNotLeader {
		t.Fatalf("enqueue on a follower: %v, want ErrNotLeader", err)
	}
}

// TestGroupLaggingFollowerSnapshot: a member that was down while the log
// was compacted past it catches up from a snapshot that carries the live
// messages' bodies, and serves them once it leads.
func TestGroupLaggingFollowerSnapshot(t *testing.T) { eachStorage(t, testGroupLaggingFollowerSnapshot) }

func testGroupLaggingFollowerSnapshot(t *testing.T, st storage) {
	g := newGroup(t, st)
	_, lead := g.leader()
	publish(t, lead, 0, 10) // the old messages that stay live
	testwait.For(t, 20*time.Second, "c to apply", func() bool { return g.members["c"].Stats().Ready == 10 })
	g.stop("c")

	// Enough traffic, settled, to compact the log well past c.
	c := &fakeConsumer{}
	if err := lead.Consume(c, queue.ConsumeOptions{Prefetch: 5000}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the old messages", func() bool { return len(c.ids()) == 10 })
	lead.Cancel(c)
	lead.Requeue(c.ids(), queue.ReturnNack) // back to ready, still live
	publish(t, lead, 10, 3000)
	if err := lead.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	for _, r := range g.members {
		if err := r.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}

	g.start("c", false)
	testwait.For(t, 20*time.Second, "c to catch up", func() bool { return g.members["c"].Stats().Ready == 3010 })
	// Now c must serve the old messages: make it lead. A transfer times
	// out when the leader's replication to c is still in the backoff it
	// entered while c was down (raft retries it on its own schedule), so
	// try again until one goes through.
	testwait.For(t, 20*time.Second, "c to lead", func() bool {
		for _, n := range []string{"a", "b"} {
			if g.members[n].IsLeader() {
				if err := g.members[n].raft.LeadershipTransferToServer("c", "c").Error(); err != nil {
					t.Logf("transfer to c: %v; again", err)
				}
			}
		}
		return g.members["c"].IsLeader()
	})
	lead = g.members["c"]
	got := &fakeConsumer{}
	if err := lead.Consume(got, queue.ConsumeOptions{Prefetch: 5000}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "every message from c", func() bool { return len(got.ids()) == 3010 })
	got.mu.Lock()
	defer got.mu.Unlock()
	seen := map[string]bool{}
	for _, d := range got.got {
		seen[string(d.Message.Body)] = true
	}
	for i := 0; i < 10; i++ {
		if !seen[fmt.Sprintf("m%d", i)] {
			t.Fatalf("old message m%d missing on the new leader", i)
		}
	}
}

var verbose = os.Getenv("REPLICA_TEST_LOG") != ""

func testLog(n string) *slog.Logger {
	if verbose {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("member", n)
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
