package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/proto/adminpb"
)

func (b *fixedBackend) LocalMembers() map[string]MemberStatus { return b.local }
func (b *fixedBackend) TransferLeadership(context.Context, string, string) error {
	return ErrNotLeader
}

// world is a cluster whose queue leaders move: every node's backend reads
// and changes it. Queues q0…q(n-1) in vhost "/" have every node as member.
type world struct {
	mu      sync.Mutex
	nodes   []string
	addrs   map[string]string
	down    map[string]bool // nodes that neither serve nor are alive
	leaders map[string]string
	queues  []string
	members map[string][]string
	moves   int
	// behind holds nodes whose replicas lack that many committed
	// entries; stale, nodes whose replicas have not heard from the
	// current leaders (an older term).
	behind map[string]uint64
	stale  map[string]bool
	// countsAsked is how often Queues was asked for message counts,
	// which ask every queue's leader on a real node.
	countsAsked int
}

type worldNode struct {
	*world
	self string
}

func (w *worldNode) Self() string { return w.self }
func (w *worldNode) Nodes() []NodeInfo {
	var out []NodeInfo
	for _, n := range w.nodes {
		st := membership.Alive
		if w.down[n] {
			st = membership.Dead
		}
		out = append(out, NodeInfo{Member: membership.Member{Meta: membership.Meta{Name: n, Internal: w.addrs[n]}, State: st}})
	}
	return out
}
func (w *worldNode) MetadataLeader() string { return w.nodes[0] }
func (w *worldNode) Queues(vhost string, counts bool) []QueueInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	if counts {
		w.countsAsked++
	}
	var out []QueueInfo
	for _, q := range w.queues {
		out = append(out, QueueInfo{Vhost: "/", Name: q, Type: "quorum", Leader: w.leaders[q], Members: w.members[q]})
	}
	out = append(out, QueueInfo{Vhost: "/", Name: "classic", Type: "classic", Leader: w.nodes[0], Members: w.nodes[:1]})
	return out
}
func (w *worldNode) QueueGroup(vhost, name string) (string, []string, error) {
	if name == "classic" {
		return "", nil, ErrNotQuorum
	}
	if vhost != "/" || !slices.Contains(w.queues, name) {
		return "", nil, ErrNotFound
	}
	return "q-" + name, w.members[name], nil
}
func (w *worldNode) LocalMember(id string) (MemberStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := id[2:]
	if !slices.Contains(w.members[q], w.self) {
		return MemberStatus{}, false
	}
	if w.leaders[q] == w.self {
		return MemberStatus{Role: RoleLeader, Term: 2, CommitIndex: 10000, AppliedIndex: 10000, LastLogIndex: 10000}, true
	}
	st := MemberStatus{Role: RoleFollower, Term: 2, CommitIndex: 10000, AppliedIndex: 10000, LastLogIndex: 10000}
	if w.stale[w.self] {
		st.Term = 1
	}
	st.LastLogIndex -= w.behind[w.self]
	return st, true
}
func (w *worldNode) LocalMembers() map[string]MemberStatus {
	out := map[string]MemberStatus{}
	for _, q := range w.queues {
		if st, ok := w.LocalMember("q-" + q); ok {
			out["q-"+q] = st
		}
	}
	return out
}
func (w *worldNode) TransferLeadership(_ context.Context, id, to string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := id[2:]
	if !slices.Contains(w.members[q], w.self) {
		return ErrNotFound
	}
	if w.leaders[q] != w.self {
		return ErrNotLeader
	}
	w.leaders[q] = to
	w.moves++
	return nil
}
func (w *worldNode) NodeAddr(node string) (string, bool) {
	a, ok := w.addrs[node]
	return a, ok
}
func (w *worldNode) SetPolicy(PolicyInfo) error             { return nil }
func (w *worldNode) ClearPolicy(string, string, bool) error { return nil }
func (w *worldNode) Policies(string, bool) []PolicyInfo     { return nil }
func (w *world) leaderCounts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	counts := map[string]int{}
	for _, l := range w.leaders {
		counts[l]++
	}
	return counts
}

// startWorld serves the admin service of every node of w not down, and
// returns a client of the first one.
func startWorld(t *testing.T, w *world) adminpb.AdminClient {
	t.Helper()
	w.addrs = map[string]string{}
	lns := map[string]net.Listener{}
	for _, n := range w.nodes {
		ln := listen(t)
		w.addrs[n] = ln.Addr().String()
		lns[n] = ln
	}
	for _, n := range w.nodes {
		if w.down[n] {
			lns[n].Close()
			continue
		}
		pool := rpc.NewPool()
		g := grpc.NewServer(rpc.ServerOptions()...)
		NewServer(&worldNode{world: w, self: n}, pool, nil).Register(g)
		go g.Serve(lns[n])
		t.Cleanup(func() { g.Stop(); pool.Close() })
	}
	conn, err := grpc.NewClient(w.addrs[w.nodes[0]], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return adminpb.NewAdminClient(conn)
}

// newWorld has nodes warren-0…warren-2 and n queues, all led by leader.
func newWorld(n int, leader string) *world {
	w := &world{nodes: []string{"warren-0", "warren-1", "warren-2"}, down: map[string]bool{},
		leaders: map[string]string{}, members: map[string][]string{}, behind: map[string]uint64{}, stale: map[string]bool{}}
	for i := range n {
		q := fmt.Sprintf("q%d", i)
		w.queues = append(w.queues, q)
		w.members[q] = w.nodes
		w.leaders[q] = leader
	}
	return w
}

func TestTransferLeadership(t *testing.T) {
	w := newWorld(2, "warren-1")
	c := startWorld(t, w)
	// Asked of warren-0, led by warren-1: warren-0 asks warren-1.
	resp, err := c.TransferLeadership(ctx(t), &adminpb.TransferLeadershipRequest{Name: "q0", To: "warren-2"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Vhost != "/" || resp.From != "warren-1" || resp.To != "warren-2" || !resp.Moved || w.leaderCounts()["warren-2"] != 1 {
		t.Errorf("got %v, leaders %v", resp, w.leaders)
	}
	// Led by warren-0 itself now, then already there.
	if _, err := c.TransferLeadership(ctx(t), &adminpb.TransferLeadershipRequest{Name: "q1", To: "warren-0"}); err != nil {
		t.Fatal(err)
	}
	resp, err = c.TransferLeadership(ctx(t), &adminpb.TransferLeadershipRequest{Name: "q1", To: "warren-0"})
	if err != nil || resp.Moved || resp.From != "warren-0" {
		t.Errorf("again: %v, %v", resp, err)
	}
	if w.moves != 2 {
		t.Errorf("%d moves, want 2", w.moves)
	}

	for _, tc := range []struct {
		req  *adminpb.TransferLeadershipRequest
		code codes.Code
		msg  string
	}{
		{&adminpb.TransferLeadershipRequest{Name: "nope", To: "warren-1"}, codes.NotFound, "queue 'nope' in vhost '/' not found"},
		{&adminpb.TransferLeadershipRequest{Name: "classic", To: "warren-1"}, codes.FailedPrecondition, "queue 'classic' in vhost '/' is not a quorum queue"},
		{&adminpb.TransferLeadershipRequest{Name: "q0", To: "warren-9"}, codes.InvalidArgument, "node 'warren-9' is not a member of queue 'q0' in vhost '/' (members: [warren-0 warren-1 warren-2])"},
	} {
		_, err := c.TransferLeadership(ctx(t), tc.req)
		if s := status.Convert(err); s.Code() != tc.code || s.Message() != tc.msg {
			t.Errorf("%v: %v", tc.req, err)
		}
	}
}

// A transfer to a follower behind its leader waits for it to catch up
// (Raft's transfer would refuse the queue's writes meanwhile).
func TestTransferLeadershipWaitsForCatchUp(t *testing.T) {
	w := newWorld(1, "warren-0")
	w.behind["warren-2"] = maxTransferLag + 1
	c := startWorld(t, w)
	done := make(chan error, 1)
	go func() {
		_, err := c.TransferLeadership(ctx(t), &adminpb.TransferLeadershipRequest{Name: "q0", To: "warren-2"})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("transferred to a follower too far behind (err %v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	w.mu.Lock()
	w.behind["warren-2"] = 0
	w.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := w.leaderCounts(); got["warren-2"] != 1 {
		t.Errorf("leaders %v", got)
	}
}

func TestTransferLeadershipToDeadNode(t *testing.T) {
	w := newWorld(1, "warren-0")
	w.down["warren-2"] = true
	c := startWorld(t, w)
	_, err := c.TransferLeadership(ctx(t), &adminpb.TransferLeadershipRequest{Name: "q0", To: "warren-2"})
	if s := status.Convert(err); s.Code() != codes.FailedPrecondition || s.Message() != "node 'warren-2' is not alive" {
		t.Errorf("got %v", err)
	}
}

// Nine queues led by one node end three on each; a second run moves
// nothing.
func TestRebalance(t *testing.T) {
	w := newWorld(9, "warren-2")
	c := startWorld(t, w)
	resp, err := c.Rebalance(ctx(t), &adminpb.RebalanceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.leaderCounts(); got["warren-0"] != 3 || got["warren-1"] != 3 || got["warren-2"] != 3 {
		t.Errorf("leaders %v", got)
	}
	if len(resp.Moves) != 6 || w.moves != 6 {
		t.Errorf("%d moves reported, %d made", len(resp.Moves), w.moves)
	}
	for _, m := range resp.Moves {
		if m.From != "warren-2" || m.Error != "" {
			t.Errorf("move %v", m)
		}
	}
	var nodes []string
	for _, n := range resp.Nodes {
		nodes = append(nodes, fmt.Sprintf("%s %d→%d", n.Node, n.Before, n.After))
	}
	if want := []string{"warren-0 0→3", "warren-1 0→3", "warren-2 9→3"}; !slices.Equal(nodes, want) {
		t.Errorf("nodes %v, want %v", nodes, want)
	}
	resp, err = c.Rebalance(ctx(t), &adminpb.RebalanceRequest{})
	if err != nil || len(resp.Moves) != 0 {
		t.Errorf("second rebalance: %v, %v", resp, err)
	}
}

// A follower behind its leader is no target: a transfer would hold the
// queue's writes until it caught up. A few entries behind is caught up
// (a busy queue's follower always trails a little).
func TestRebalanceSkipsFollowersBehind(t *testing.T) {
	for _, tc := range []struct {
		name   string
		behind uint64
		stale  bool
		want   map[string]int
	}{
		{"entries missing", maxTransferLag + 1, false, map[string]int{"warren-0": 4, "warren-1": 0, "warren-2": 5}},
		{"older term", 0, true, map[string]int{"warren-0": 4, "warren-1": 0, "warren-2": 5}},
		{"trailing a little", maxTransferLag, false, map[string]int{"warren-0": 3, "warren-1": 3, "warren-2": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(9, "warren-2")
			w.behind["warren-1"], w.stale["warren-1"] = tc.behind, tc.stale
			c := startWorld(t, w)
			resp, err := c.Rebalance(ctx(t), &adminpb.RebalanceRequest{})
			if err != nil {
				t.Fatal(err)
			}
			got := w.leaderCounts()
			for n, want := range tc.want {
				if got[n] != want {
					t.Errorf("leaders %v, want %v", got, tc.want)
					break
				}
			}
			for _, m := range resp.Moves {
				if m.Error != "" {
					t.Errorf("move %v", m)
				}
			}
			// Once caught up, the next rebalance evens it out.
			w.mu.Lock()
			w.behind["warren-1"], w.stale["warren-1"] = 0, false
			w.mu.Unlock()
			if _, err := c.Rebalance(ctx(t), &adminpb.RebalanceRequest{}); err != nil {
				t.Fatal(err)
			}
			if got := w.leaderCounts(); got["warren-0"] != 3 || got["warren-1"] != 3 || got["warren-2"] != 3 {
				t.Errorf("after catching up: leaders %v", got)
			}
		})
	}
}

// Patterns select the queues; a dead node leads nothing new; a queue
// without a leader is left alone.
func TestRebalanceSelection(t *testing.T) {
	w := newWorld(8, "warren-0")
	w.down["warren-2"] = true
	w.leaders["q7"] = ""
	c := startWorld(t, w)
	resp, err := c.Rebalance(ctx(t), &adminpb.RebalanceRequest{QueuePattern: "^q[0-3]$"})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.leaderCounts(); got["warren-0"] != 5 || got["warren-1"] != 2 || got["warren-2"] != 0 {
		t.Errorf("leaders %v", got)
	}
	resp, err = c.Rebalance(ctx(t), &adminpb.RebalanceRequest{VhostPattern: "^/$"})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.leaderCounts(); got["warren-0"] != 4 || got["warren-1"] != 3 {
		t.Errorf("leaders %v", got)
	}
	if len(resp.Leaderless) != 1 || resp.Leaderless[0].Name != "q7" || len(resp.Nodes) != 2 {
		t.Errorf("got %v", resp)
	}
	if _, err := c.Rebalance(ctx(t), &adminpb.RebalanceRequest{QueuePattern: "("}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad pattern: %v", err)
	}
}

func TestChecks(t *testing.T) {
	w := newWorld(2, "warren-0")
	w.members["q1"] = []string{"warren-0", "warren-1"}
	w.down["warren-2"] = true
	c := startWorld(t, w)
	names := func(r *adminpb.CheckResponse) []string {
		var out []string
		for _, q := range r.Queues {
			out = append(out, q.Name)
		}
		return out
	}
	for node, want := range map[string][]string{
		"warren-0": {"q0", "q1"}, // q0: warren-1 alone of three; q1: warren-1 alone of two
		"warren-1": {"q0", "q1"},
		"warren-2": nil, // down already: stopping it changes nothing
	} {
		resp, err := c.CheckQuorumCritical(ctx(t), &adminpb.CheckQuorumCriticalRequest{Node: node})
		if err != nil || !slices.Equal(names(resp), want) {
			t.Errorf("%s: %v, %v; want %v", node, resp, err, want)
		}
	}
	resp, _ := c.CheckQuorumCritical(ctx(t), &adminpb.CheckQuorumCriticalRequest{Node: "warren-0"})
	if q := resp.Queues[0]; q.Leader != "warren-0" || len(q.Members) != 3 || !slices.Equal(q.OnlineMembers, []string{"warren-0", "warren-1"}) {
		t.Errorf("q0: %v", q)
	}
	if _, err := c.CheckQuorumCritical(ctx(t), &adminpb.CheckQuorumCriticalRequest{Node: "warren-9"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown node: %v", err)
	}

	resp, err := c.CheckLeaderless(ctx(t), &adminpb.CheckLeaderlessRequest{})
	if err != nil || len(resp.Queues) != 0 {
		t.Errorf("leaderless: %v, %v", resp, err)
	}
	w.mu.Lock()
	w.leaders["q1"] = ""
	w.mu.Unlock()
	resp, err = c.CheckLeaderless(ctx(t), &adminpb.CheckLeaderlessRequest{})
	if err != nil || !slices.Equal(names(resp), []string{"q1"}) || resp.Queues[0].Leader != "" {
		t.Errorf("leaderless: %v, %v", resp, err)
	}
	// The checks show no counts and must not wait for them: right after
	// a node dies, asking its queues for counts waits on each one.
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.countsAsked != 0 {
		t.Errorf("the checks asked for message counts %d times", w.countsAsked)
	}
}

// Membership operations are tested against real nodes (cluster/node).
func (*fixedBackend) AddMember(context.Context, string, string, string, string) error {
	return errNoMembership
}
func (*fixedBackend) DeleteMember(context.Context, string, string, string, bool) error {
	return errNoMembership
}
func (*fixedBackend) Grow(context.Context, string, string, string, string, string) ([]string, error) {
	return nil, errNoMembership
}
func (*fixedBackend) Shrink(context.Context, string) ([]string, error) { return nil, errNoMembership }

// Membership operations are tested against real nodes (cluster/node).
func (*worldNode) AddMember(context.Context, string, string, string, string) error {
	return errNoMembership
}
func (*worldNode) DeleteMember(context.Context, string, string, string, bool) error {
	return errNoMembership
}
func (*worldNode) Grow(context.Context, string, string, string, string, string) ([]string, error) {
	return nil, errNoMembership
}
func (*worldNode) Shrink(context.Context, string) ([]string, error) { return nil, errNoMembership }

var errNoMembership = errors.New("membership changes are not simulated here")
