package metaraft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/raftq/testwait"
)

// testNode is one member: a Store, its Meta gRPC server on 127.0.0.1 and
// an in-memory Raft transport connected to the other members'.
type testNode struct {
	id, addr, dir string
	trans         *raft.InmemTransport
	srv           *grpc.Server
	pool          *rpc.Pool
	store         *Store
	updates       *recorder
}

type testCluster struct {
	t     *testing.T
	mu    sync.Mutex
	nodes []*testNode
	// commitTimeout is each member's Config.CommitTimeout (zero: the
	// default).
	commitTimeout time.Duration
}

func testLogger() *slog.Logger {
	if os.Getenv("META_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// newCluster starts n members with no Raft state.
func newCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return newClusterCommitTimeout(t, n, 0)
}

// newClusterCommitTimeout is newCluster with each member's CommitTimeout.
func newClusterCommitTimeout(t *testing.T, n int, commitTimeout time.Duration) *testCluster {
	t.Helper()
	c := &testCluster{t: t, commitTimeout: commitTimeout}
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nd := &testNode{id: fmt.Sprintf("n%d", i), addr: l.Addr().String(), dir: t.TempDir()}
		c.nodes = append(c.nodes, nd)
		c.start(nd, l)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			c.stop(nd)
		}
	})
	return c
}

// start opens nd's store (again, after stop) and connects its transport.
func (c *testCluster) start(nd *testNode, l net.Listener) {
	t := c.t
	t.Helper()
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", nd.addr); err != nil {
			t.Fatal(err)
		}
	}
	_, nd.trans = raft.NewInmemTransport(raft.ServerAddress(nd.addr))
	nd.pool = rpc.NewPool()
	store, err := Open(Config{
		NodeID: nd.id, Addr: nd.addr, Dir: nd.dir, Transport: nd.trans, Pool: nd.pool,
		Log:              testLogger().With("node", nd.id),
		HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
		CommitTimeout: c.commitTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	nd.store = store
	nd.updates = &recorder{}
	nd.updates.start, nd.updates.index = store.Subscribe(nd.updates.add)
	nd.srv = grpc.NewServer(rpc.ServerOptions()...)
	store.Register(nd.srv)
	go nd.srv.Serve(l)
	c.connect(nd)
}

func (c *testCluster) connect(nd *testNode) {
	for _, o := range c.nodes {
		if o != nd && o.store != nil {
			o.trans.Connect(raft.ServerAddress(nd.addr), nd.trans)
			nd.trans.Connect(raft.ServerAddress(o.addr), o.trans)
		}
	}
}

func (c *testCluster) disconnect(nd *testNode) {
	for _, o := range c.nodes {
		if o != nd && o.store != nil {
			o.trans.Disconnect(raft.ServerAddress(nd.addr))
		}
	}
	nd.trans.DisconnectAll()
}

func (c *testCluster) stop(nd *testNode) {
	if nd.store == nil {
		return
	}
	c.disconnect(nd)
	if err := nd.store.Close(); err != nil {
		c.t.Errorf("close %s: %v", nd.id, err)
	}
	nd.srv.Stop()
	nd.pool.Close()
	nd.store = nil
}

func (c *testCluster) servers(nodes ...*testNode) []Server {
	var out []Server
	for _, nd := range nodes {
		out = append(out, Server{ID: nd.id, Addr: nd.addr, Voter: true})
	}
	return out
}

// leader waits for a leader among the running members and returns it.
func (c *testCluster) leader() *testNode {
	c.t.Helper()
	var found *testNode
	testwait.For(c.t, 15*time.Second, "a leader", func() bool {
		for _, nd := range c.nodes {
			if nd.store != nil && nd.store.IsLeader() {
				found = nd
				return true
			}
		}
		return false
	})
	return found
}

func (c *testCluster) follower() *testNode {
	c.t.Helper()
	l := c.leader()
	for _, nd := range c.nodes {
		if nd != l && nd.store != nil {
			return nd
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// converged waits until every running member's copy equals want.
func (c *testCluster) converged(want *catalog.Snapshot) {
	c.t.Helper()
	for _, nd := range c.nodes {
		if nd.store == nil {
			continue
		}
		var got *catalog.Snapshot
		testwait.ForNil(c.t, 15*time.Second, nd.id+" to have the state", func() error {
			got, _ = nd.store.Load()
			return differs(got, want)
		})
		// The subscriber's view (start plus updates) agrees.
		testwait.ForNil(c.t, 15*time.Second, nd.id+"'s subscriber to have the state", func() error {
			got = nd.updates.view()
			return differs(got, want)
		})
	}
}

// recorder keeps the updates a subscriber received.
type recorder struct {
	start *catalog.Snapshot // what Subscribe returned
	index uint64
	mu    sync.Mutex
	us    []Update
}

// view folds the updates onto the starting state, as a subscriber that
// materialises the store does.
func (r *recorder) view() *catalog.Snapshot {
	st := stateOf(r.start)
	for _, u := range r.all() {
		if u.Reset != nil {
			st = stateOf(u.Reset)
			continue
		}
		for i := range u.Changes {
			st.change(&u.Changes[i])
		}
	}
	return st.snapshot()
}

func stateOf(snap *catalog.Snapshot) *state {
	st := newState()
	put := func(c catalog.Change) { st.change(&c) }
	for _, r := range snap.Vhosts {
		put(catalog.Put(r))
	}
	for _, r := range snap.Users {
		put(catalog.Put(r))
	}
	for _, r := range snap.Permissions {
		put(catalog.Put(r))
	}
	for _, r := range snap.Exchanges {
		put(catalog.Put(r))
	}
	for _, r := range snap.Bindings {
		put(catalog.Put(r))
	}
	for _, r := range snap.Queues {
		put(catalog.Put(r))
	}
	return st
}

func (r *recorder) add(u Update) {
	r.mu.Lock()
	r.us = append(r.us, u)
	r.mu.Unlock()
}

func (r *recorder) all() []Update {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Update(nil), r.us...)
}

func (r *recorder) wait(t *testing.T, n int) []Update {
	t.Helper()
	testwait.ForNil(t, 15*time.Second, fmt.Sprintf("%d updates", n), func() error {
		if have := r.all(); len(have) < n {
			return fmt.Errorf("have %+v", have)
		}
		return nil
	})
	return r.all()
}

func snapshotOf(vhosts []catalog.Vhost, exchanges []catalog.Exchange, queues []catalog.Queue, bindings []catalog.Binding) *catalog.Snapshot {
	return &catalog.Snapshot{Vhosts: vhosts, Exchanges: exchanges, Queues: queues, Bindings: bindings}
}

func TestForwardedApplyReachesEveryMember(t *testing.T) {
	c := newCluster(t, 3)
	if err := c.nodes[0].store.Bootstrap(c.servers(c.nodes...)); err != nil {
		t.Fatal(err)
	}
	f := c.follower()
	if f.store.IsLeader() {
		t.Fatal("follower leads")
	}
	batches := [][]catalog.Change{
		{catalog.Put(vhostA)},
		{catalog.Put(exchX), catalog.Create(queueQ)},
		{catalog.Put(bindB)},
		{catalog.Del(bindB)},
	}
	for _, b := range batches {
		if err := f.store.Apply(b...); err != nil {
			t.Fatalf("apply on follower %s: %v", f.id, err)
		}
	}
	c.converged(snapshotOf([]catalog.Vhost{vhostA}, []catalog.Exchange{exchX}, []catalog.Queue{queueQ}, nil))
	for _, nd := range c.nodes {
		us := nd.updates.wait(t, len(batches))
		if len(us) != len(batches) {
			t.Fatalf("%s: %d updates, want %d: %+v", nd.id, len(us), len(batches), us)
		}
		for i, u := range us {
			if u.Origin != f.store.Origin() || u.Reset != nil || !reflect.DeepEqual(u.Changes, batches[i]) {
				t.Fatalf("%s: update %d = %+v, want changes %+v from %s", nd.id, i, u, batches[i], f.store.Origin())
			}
			if i > 0 && u.Index <= us[i-1].Index {
				t.Fatalf("%s: update indexes out of order: %d after %d", nd.id, u.Index, us[i-1].Index)
			}
		}
	}
}

// Followers apply a commit as soon as the leader's barrier after it
// reaches them, not a CommitTimeout later: with a CommitTimeout far longer
// than the test, every member still has each change (and a follower's
// CatchUp returns) within seconds.
func TestFollowersApplyCommitsWithoutCommitTimeout(t *testing.T) {
	c := newClusterCommitTimeout(t, 3, time.Hour)
	if err := c.nodes[0].store.Bootstrap(c.servers(c.nodes...)); err != nil {
		t.Fatal(err)
	}
	f := c.follower()
	batches := [][]catalog.Change{{catalog.Put(vhostA)}, {catalog.Put(exchX), catalog.Create(queueQ)}, {catalog.Put(bindB)}}
	for i, b := range batches {
		if err := f.store.Apply(b...); err != nil {
			t.Fatalf("apply on follower %s: %v", f.id, err)
		}
		for _, nd := range c.nodes {
			nd.updates.wait(t, i+1)
		}
	}
	c.converged(snapshotOf([]catalog.Vhost{vhostA}, []catalog.Exchange{exchX}, []catalog.Queue{queueQ}, []catalog.Binding{bindB}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, nd := range c.nodes {
		if err := nd.store.CatchUp(ctx); err != nil {
			t.Fatalf("%s: catch up: %v", nd.id, err)
		}
	}
}

// formedCluster is a bootstrapped three-node cluster with its leader and
// a follower that has been handed the first change (vhostA).
func formedCluster(t *testing.T) (c *testCluster, l, f *testNode) {
	t.Helper()
	c = newCluster(t, 3)
	if err := c.nodes[0].store.Bootstrap(c.servers(c.nodes...)); err != nil {
		t.Fatal(err)
	}
	l, f = c.leader(), c.follower()
	if err := l.store.Apply(catalog.Put(vhostA)); err != nil {
		t.Fatal(err)
	}
	f.updates.wait(t, 1)
	return c, l, f
}

// CatchUp returns only once the FSM holds what the leader had applied:
// raft counts an entry applied as soon as it hands it to the FSM's
// goroutine, before the FSM has applied it. With a follower's FSM held
// up (its lock taken) CatchUp waits, and when it returns the follower's
// state has the change. (A restarted node that caught up early saw its
// queues as deleted and removed their data.)
func TestCatchUpWaitsForTheFSM(t *testing.T) {
	_, l, f := formedCluster(t)

	f.store.fsm.mu.Lock()
	held := true
	defer func() {
		if held {
			f.store.fsm.mu.Unlock()
		}
	}()
	if err := l.store.Apply(catalog.Put(exchX)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- f.store.CatchUp(ctx)
	}()
	testwait.For(t, 5*time.Second, "the follower's raft to hand its FSM the change", func() bool {
		return f.store.raft.AppliedIndex() >= l.store.raft.AppliedIndex()
	})
	select {
	case err := <-done:
		t.Fatalf("CatchUp returned (%v) before the FSM applied the change", err)
	case <-time.After(300 * time.Millisecond):
	}
	f.store.fsm.mu.Unlock()
	held = false
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	snap, _ := f.store.Load()
	if !slices.ContainsFunc(snap.Exchanges, func(e catalog.Exchange) bool { return e.Vhost == exchX.Vhost && e.Name == exchX.Name }) {
		t.Fatalf("after CatchUp the follower's state has no exchange %s: %+v", exchX.Name, snap.Exchanges)
	}
}

func TestCreateTwiceIsRefused(t *testing.T) {
	c := newCluster(t, 3)
	if err := c.nodes[0].store.Bootstrap(c.servers(c.nodes...)); err != nil {
		t.Fatal(err)
	}
	l, f := c.leader(), c.follower()
	if err := f.store.Apply(catalog.Put(vhostA), catalog.Create(queueQ)); err != nil {
		t.Fatal(err)
	}
	other := queueQ
	other.ID = "g2"
	if err := f.store.Apply(catalog.Create(other)); !errors.Is(err, catalog.ErrExists) {
		t.Fatalf("second create on a follower: %v, want ErrExists", err)
	}
	if err := l.store.Apply(catalog.Put(exchX), catalog.Create(other)); !errors.Is(err, catalog.ErrExists) {
		t.Fatalf("second create on the leader: %v, want ErrExists", err)
	}
	// A proposal committed twice (a retry across a leader change) is
	// applied once and answers its first outcome both times.
	data, err := encodeEntry(&entry{Origin: l.store.Origin(), ID: randomID(16), Changes: []catalog.Change{catalog.Create(bindB)}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := l.store.applyLocal(context.Background(), data); err != nil {
			t.Fatalf("proposal committed twice, attempt %d: %v", i, err)
		}
	}
	c.converged(snapshotOf([]catalog.Vhost{vhostA}, nil, []catalog.Queue{queueQ}, []catalog.Binding{bindB}))
	// A marker after them: once it arrives, every earlier update has.
	if err := f.store.Apply(catalog.Put(vhostA)); err != nil {
		t.Fatal(err)
	}
	for _, nd := range c.nodes {
		us := nd.updates.wait(t, 3)
		if len(us) != 3 || !reflect.DeepEqual(us[1].Changes, []catalog.Change{catalog.Create(bindB)}) ||
			!reflect.DeepEqual(us[2].Changes, []catalog.Change{catalog.Put(vhostA)}) {
			t.Fatalf("%s: updates %+v: the refused and repeated entries must make none", nd.id, us)
		}
	}
}

func TestRestartRebuildsState(t *testing.T) {
	c := newCluster(t, 3)
	if err := c.nodes[0].store.Bootstrap(c.servers(c.nodes...)); err != nil {
		t.Fatal(err)
	}
	l := c.leader()
	if err := l.store.Apply(catalog.Put(vhostA), catalog.Put(exchX)); err != nil {
		t.Fatal(err)
	}
	want := snapshotOf([]catalog.Vhost{vhostA}, []catalog.Exchange{exchX}, nil, nil)
	c.converged(want)
	// Restart one member from its snapshot plus log, another from its log
	// alone.
	snapped, plain := c.nodes[1], c.nodes[2]
	if err := snapped.store.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if err := l.store.Apply(catalog.Put(queueQ)); err != nil {
		t.Fatal(err)
	}
	want.Queues = []catalog.Queue{queueQ}
	c.converged(want)
	for _, nd := range []*testNode{snapped, plain} {
		c.stop(nd)
		c.start(nd, nil)
		if !nd.store.HasState() {
			t.Fatalf("%s: no state after restart", nd.id)
		}
		if err := nd.store.Bootstrap(c.servers(nd)); err != nil {
			t.Fatalf("%s: bootstrap on a member with state: %v", nd.id, err)
		}
		c.converged(want)
	}
	if err := plain.store.Apply(catalog.Put(bindB)); err != nil {
		t.Fatal(err)
	}
	want.Bindings = []catalog.Binding{bindB}
	c.converged(want)
	servers, err := plain.store.Servers()
	if err != nil || len(servers) != 3 {
		t.Fatalf("servers after restart and bootstrap: %+v %v", servers, err)
	}
}

func TestLaggingFollowerGetsReset(t *testing.T) {
	c := newCluster(t, 3)
	if err := c.nodes[0].store.Bootstrap(c.servers(c.nodes...)); err != nil {
		t.Fatal(err)
	}
	f := c.follower()
	if err := f.store.Apply(catalog.Put(vhostA)); err != nil {
		t.Fatal(err)
	}
	f.updates.wait(t, 1)
	c.disconnect(f)
	var others []*testNode
	for _, nd := range c.nodes {
		if nd != f {
			others = append(others, nd)
		}
	}
	if err := others[0].store.Apply(catalog.Put(exchX), catalog.Put(queueQ)); err != nil {
		t.Fatal(err)
	}
	if err := others[1].store.Apply(catalog.Put(bindB)); err != nil {
		t.Fatal(err)
	}
	want := snapshotOf([]catalog.Vhost{vhostA}, []catalog.Exchange{exchX}, []catalog.Queue{queueQ}, []catalog.Binding{bindB})
	// Snapshot and compact both connected members, so that whichever
	// leads no longer has the entries f is missing.
	for _, nd := range others {
		testwait.For(t, 15*time.Second, nd.id+" applied", func() bool {
			got, _ := nd.store.Load()
			return reflect.DeepEqual(got, want)
		})
		rc := nd.store.raft.ReloadableConfig()
		rc.TrailingLogs = 1
		if err := nd.store.raft.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
		if err := nd.store.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	c.connect(f)
	c.converged(want)
	us := f.updates.wait(t, 2)
	if us[1].Reset == nil || us[1].Changes != nil || !reflect.DeepEqual(us[1].Reset, want) || us[1].Index <= us[0].Index {
		t.Fatalf("updates after catching up: %+v, want a Reset to %+v", us, want)
	}
	// Ordinary updates follow.
	if err := f.store.Apply(catalog.Del(bindB)); err != nil {
		t.Fatal(err)
	}
	us = f.updates.wait(t, 3)
	if us[len(us)-1].Reset != nil || len(us[len(us)-1].Changes) != 1 {
		t.Fatalf("update after the reset: %+v", us[len(us)-1])
	}
}

func TestApplySurvivesLeaderLoss(t *testing.T) {
	c := newCluster(t, 3)
	if err := c.nodes[0].store.Bootstrap(c.servers(c.nodes...)); err != nil {
		t.Fatal(err)
	}
	old := c.leader()
	if err := old.store.Apply(catalog.Put(vhostA)); err != nil {
		t.Fatal(err)
	}
	c.converged(snapshotOf([]catalog.Vhost{vhostA}, nil, nil, nil))
	c.stop(old)
	var survivor *testNode
	for _, nd := range c.nodes {
		if nd.store != nil {
			survivor = nd
			break
		}
	}
	if err := survivor.store.Apply(catalog.Put(exchX)); err != nil {
		t.Fatalf("apply after the leader's loss: %v", err)
	}
	c.converged(snapshotOf([]catalog.Vhost{vhostA}, []catalog.Exchange{exchX}, nil, nil))
	if id, _ := survivor.store.Leader(); id == old.id || id == "" {
		t.Fatalf("leader after loss: %q", id)
	}
}

func TestApplyWithoutLeaderFails(t *testing.T) {
	c := newCluster(t, 1)
	s := c.nodes[0].store
	s.applyTimeout = 300 * time.Millisecond
	err := s.Apply(catalog.Put(vhostA))
	if err == nil || errors.Is(err, catalog.ErrExists) || !errors.Is(err, errNoLeader) {
		t.Fatalf("apply without a cluster: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.WaitLeader(ctx); err == nil {
		t.Fatal("WaitLeader without a cluster succeeded")
	}
}

func TestAddServerCapsVoters(t *testing.T) {
	c := newCluster(t, 6)
	if err := c.nodes[0].store.Bootstrap(c.servers(c.nodes[0])); err != nil {
		t.Fatal(err)
	}
	c.leader()
	if err := c.nodes[0].store.Apply(catalog.Put(vhostA)); err != nil {
		t.Fatal(err)
	}
	// Each member is added through the previous one: forwarded from the
	// second on.
	for i := 1; i < len(c.nodes); i++ {
		nd := c.nodes[i]
		if err := c.nodes[i-1].store.AddServer(nd.id, nd.addr); err != nil {
			t.Fatalf("add %s via %s: %v", nd.id, c.nodes[i-1].id, err)
		}
	}
	check := func() {
		t.Helper()
		servers, err := c.nodes[0].store.Servers()
		if err != nil {
			t.Fatal(err)
		}
		if len(servers) != 6 {
			t.Fatalf("servers %+v", servers)
		}
		for _, sv := range servers {
			if sv.Voter != (sv.ID != "n5") {
				t.Fatalf("servers %+v: want n0..n4 voters, n5 a non-voter", servers)
			}
		}
	}
	check()
	if err := c.nodes[2].store.AddServer("n5", c.nodes[5].addr); err != nil {
		t.Fatalf("second add: %v", err)
	}
	check()
	c.converged(snapshotOf([]catalog.Vhost{vhostA}, nil, nil, nil))
	if err := c.nodes[5].store.Apply(catalog.Put(exchX)); err != nil {
		t.Fatalf("apply on the non-voter: %v", err)
	}
	c.converged(snapshotOf([]catalog.Vhost{vhostA}, []catalog.Exchange{exchX}, nil, nil))

	for range 2 {
		if err := c.nodes[3].store.RemoveServer("n5"); err != nil {
			t.Fatalf("remove: %v", err)
		}
	}
	testwait.For(t, 15*time.Second, "n5 removed", func() bool {
		servers, err := c.nodes[1].store.Servers()
		return err == nil && len(servers) == 5
	})
}

// MayBeStale is false on a follower in touch with its leader once it has
// applied every change, even with barriers (the notices after commits, a
// CatchUp's own) not yet known committed; it turns true when the leader
// goes quiet, and a CatchUp then waits for the next leader.
func TestMayBeStale(t *testing.T) {
	c := newCluster(t, 3)
	if err := c.nodes[0].store.Bootstrap(c.servers(c.nodes...)); err != nil {
		t.Fatal(err)
	}
	l, f := c.leader(), c.follower()
	for i, ch := range []catalog.Change{catalog.Put(vhostA), catalog.Put(exchX)} {
		if err := l.store.Apply(ch); err != nil {
			t.Fatal(err)
		}
		f.updates.wait(t, i+1)
	}
	if !f.store.MayBeStale() {
		t.Fatal("a follower that has not caught up since it started counts itself current")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.store.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if f.store.MayBeStale() || l.store.MayBeStale() {
		t.Fatalf("stale after catching up: follower %v, leader %v", f.store.MayBeStale(), l.store.MayBeStale())
	}
	c.stop(l)
	testwait.For(t, 5*time.Second, "a follower whose leader stopped to count itself possibly stale", f.store.MayBeStale)
}

// TestMayBeStaleAfterLosingTouch: a follower cut off from the leader for
// longer than staleAfter counts its copy possibly stale once the link
// heals, even with a fresh contact and nothing unapplied, until a CatchUp
// asks the leader: the first contact after a heal is a heartbeat, which
// carries none of what was committed meanwhile (a queue declared during
// the cut was unroutable through the healed node).
func TestMayBeStaleAfterLosingTouch(t *testing.T) {
	c, l, f := formedCluster(t)
	catchUp := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.store.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	catchUp()
	if f.store.MayBeStale() {
		t.Fatal("stale after catching up")
	}
	c.disconnect(f)
	if err := l.store.Apply(catalog.Put(exchX)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * f.store.staleAfter()) // cut off for longer than staleAfter, the case under test
	c.connect(f)
	f.updates.wait(t, 2) // what was committed meanwhile has arrived
	testwait.For(t, 10*time.Second, "fresh contact with the leader", func() bool {
		_, addr := f.store.Leader()
		return addr != "" && time.Since(f.store.raft.LastContact()) < f.store.staleAfter()/2
	})
	if !f.store.MayBeStale() {
		t.Fatal("a follower back from a cut counts itself current before asking the leader")
	}
	catchUp()
	if f.store.MayBeStale() {
		t.Fatal("stale after catching up again")
	}
}

// differs is nil if got and want are deeply equal, else an error showing
// both.
func differs(got, want *catalog.Snapshot) error {
	if reflect.DeepEqual(got, want) {
		return nil
	}
	return fmt.Errorf("got %+v\nwant %+v", got, want)
}
