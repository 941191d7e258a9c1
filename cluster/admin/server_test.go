package admin

import (
	"context"
	"net"
	"slices"
	"strings"
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

// fixedBackend is a node whose state never changes.
type fixedBackend struct {
	self   string
	nodes  []NodeInfo
	leader string
	queues []QueueInfo
	groups map[string][]string // "vhost name" -> members; the queue ID is "q-" + name
	local  map[string]MemberStatus
	addrs  map[string]string

	mu       sync.Mutex
	policies []PolicyInfo
}

func (b *fixedBackend) SetPolicy(p PolicyInfo) error {
	if !strings.HasPrefix(p.Definition, "{") {
		return Invalid("definition must be a dictionary")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.policies = slices.DeleteFunc(b.policies, func(q PolicyInfo) bool {
		return q.Vhost == p.Vhost && q.Name == p.Name && q.Operator == p.Operator
	})
	b.policies = append(b.policies, p)
	return nil
}
func (b *fixedBackend) ClearPolicy(vhost, name string, operator bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.policies)
	b.policies = slices.DeleteFunc(b.policies, func(q PolicyInfo) bool {
		return q.Vhost == vhost && q.Name == name && q.Operator == operator
	})
	if len(b.policies) == n {
		return ErrNotFound
	}
	return nil
}
func (b *fixedBackend) Policies(vhost string, operator bool) []PolicyInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []PolicyInfo
	for _, p := range b.policies {
		if (vhost == "" || p.Vhost == vhost) && p.Operator == operator {
			out = append(out, p)
		}
	}
	return out
}

func (b *fixedBackend) Self() string           { return b.self }
func (b *fixedBackend) Nodes() []NodeInfo      { return b.nodes }
func (b *fixedBackend) MetadataLeader() string { return b.leader }
func (b *fixedBackend) Queues(vhost string, _ bool) []QueueInfo {
	var out []QueueInfo
	for _, q := range b.queues {
		if vhost == "" || q.Vhost == vhost {
			out = append(out, q)
		}
	}
	return out
}
func (b *fixedBackend) QueueGroup(vhost, name string) (string, []string, error) {
	for _, q := range b.queues {
		if q.Vhost == vhost && q.Name == name && q.Type != "quorum" {
			return "", nil, ErrNotQuorum
		}
	}
	members, ok := b.groups[vhost+" "+name]
	if !ok {
		return "", nil, ErrNotFound
	}
	return "q-" + name, members, nil
}
func (b *fixedBackend) LocalMember(id string) (MemberStatus, bool) {
	st, ok := b.local[id]
	return st, ok
}
func (b *fixedBackend) NodeAddr(node string) (string, bool) {
	a, ok := b.addrs[node]
	return a, ok
}

// testCluster is warren-0 and warren-1 serving the admin service, and
// warren-2, whose address is a closed port. Every call is made to warren-0.
type testCluster struct {
	client adminpb.AdminClient
	addrs  map[string]string
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func startCluster(t *testing.T) *testCluster {
	t.Helper()
	ln0, ln1, ln2 := listen(t), listen(t), listen(t)
	addrs := map[string]string{"warren-0": ln0.Addr().String(), "warren-1": ln1.Addr().String(), "warren-2": ln2.Addr().String()}
	ln2.Close() // warren-2 is down

	node := func(name string, state membership.State, role MetadataRole) NodeInfo {
		return NodeInfo{Member: membership.Member{Meta: membership.Meta{
			Name: name, AMQP: "127.0.0.1:567" + name[len(name)-1:], Internal: addrs[name],
			Gossip: "127.0.0.1:794" + name[len(name)-1:], Version: "0.1.0",
		}, State: state}, MetadataRole: role}
	}
	nodes := []NodeInfo{
		node("warren-2", membership.Dead, MetadataRoleVoter),
		node("warren-0", membership.Alive, MetadataRoleLeader),
		node("warren-1", membership.Alive, MetadataRoleVoter),
	}
	queues := []QueueInfo{
		{Vhost: "/", Name: "orders", Type: "quorum", Leader: "warren-0", Members: []string{"warren-0", "warren-1", "warren-2"},
			Online: []string{"warren-0", "warren-1"}, Ready: 7, Unacked: 3, Consumers: 2},
		{Vhost: "/", Name: "amq.gen-1", Type: "classic", Leader: "warren-1", Members: []string{"warren-1"}, Online: []string{"warren-1"}},
		{Vhost: "billing", Name: "invoices", Type: "quorum", Leader: "", Members: []string{"warren-1", "warren-2"}, Online: []string{"warren-1"}},
	}
	groups := map[string][]string{
		"/ orders":         {"warren-2", "warren-1", "warren-0"},
		"billing invoices": {"warren-1", "warren-2"},
	}
	b0 := &fixedBackend{self: "warren-0", nodes: nodes, leader: "warren-0", queues: queues, groups: groups, addrs: addrs,
		local: map[string]MemberStatus{"q-orders": {Role: RoleLeader, Term: 4, CommitIndex: 120, AppliedIndex: 120, LastLogIndex: 121}}}
	b1 := &fixedBackend{self: "warren-1", nodes: nodes, leader: "warren-0", queues: queues, groups: groups, addrs: addrs,
		local: map[string]MemberStatus{
			"q-orders":   {Role: RoleFollower, Term: 4, CommitIndex: 118, AppliedIndex: 112, LastLogIndex: 115},
			"q-invoices": {Role: RoleCandidate, Term: 9, CommitIndex: 30, AppliedIndex: 30, LastLogIndex: 31},
		}}
	for _, n := range []struct {
		ln net.Listener
		b  Backend
	}{{ln0, b0}, {ln1, b1}} {
		pool := rpc.NewPool()
		g := grpc.NewServer(rpc.ServerOptions()...)
		NewServer(n.b, pool, nil).Register(g)
		go g.Serve(n.ln)
		t.Cleanup(func() { g.Stop(); pool.Close() })
	}
	conn, err := grpc.NewClient(addrs["warren-0"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &testCluster{client: adminpb.NewAdminClient(conn), addrs: addrs}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestClusterStatus(t *testing.T) {
	c := startCluster(t)
	resp, err := c.client.ClusterStatus(ctx(t), &adminpb.ClusterStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Node != "warren-0" || resp.MetadataLeader != "warren-0" {
		t.Errorf("node %q, leader %q", resp.Node, resp.MetadataLeader)
	}
	var got []string
	for _, n := range resp.Nodes {
		got = append(got, n.Name+" "+n.State+" "+n.MetadataRole+" "+n.AmqpAddr+" "+n.GossipAddr+" "+n.Version)
	}
	want := []string{
		"warren-0 alive leader 127.0.0.1:5670 127.0.0.1:7940 0.1.0",
		"warren-1 alive voter 127.0.0.1:5671 127.0.0.1:7941 0.1.0",
		"warren-2 dead voter 127.0.0.1:5672 127.0.0.1:7942 0.1.0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("nodes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if resp.Nodes[1].InternalAddr != c.addrs["warren-1"] {
		t.Errorf("internal address %q, want %q", resp.Nodes[1].InternalAddr, c.addrs["warren-1"])
	}
}

func TestListQueues(t *testing.T) {
	c := startCluster(t)
	resp, err := c.client.ListQueues(ctx(t), &adminpb.ListQueuesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range resp.Queues {
		names = append(names, q.Vhost+" "+q.Name)
	}
	if got := strings.Join(names, ", "); got != "/ amq.gen-1, / orders, billing invoices" {
		t.Errorf("queues %s", got)
	}
	q := resp.Queues[1]
	if q.Type != "quorum" || q.Leader != "warren-0" || len(q.Members) != 3 || len(q.OnlineMembers) != 2 ||
		q.Messages != 10 || q.Ready != 7 || q.Unacked != 3 || q.Consumers != 2 {
		t.Errorf("orders: %v", q)
	}

	resp, err = c.client.ListQueues(ctx(t), &adminpb.ListQueuesRequest{Vhost: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Queues) != 1 || resp.Queues[0].Name != "invoices" {
		t.Errorf("vhost billing: %v", resp.Queues)
	}
}

func TestQuorumStatus(t *testing.T) {
	c := startCluster(t)
	resp, err := c.client.QuorumStatus(ctx(t), &adminpb.QuorumStatusRequest{Vhost: "/", Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Leader != "warren-0" || resp.QueueId != "q-orders" {
		t.Errorf("leader %q, queue ID %q", resp.Leader, resp.QueueId)
	}
	if len(resp.Members) != 3 {
		t.Fatalf("members: %v", resp.Members)
	}
	m0, m1, m2 := resp.Members[0], resp.Members[1], resp.Members[2]
	// warren-0 answers for itself, warren-1 over gRPC.
	if m0.Node != "warren-0" || m0.Role != "leader" || m0.Term != 4 || m0.CommitIndex != 120 || m0.LastLogIndex != 121 || m0.Lag == nil || *m0.Lag != 0 {
		t.Errorf("warren-0: %v", m0)
	}
	if m1.Node != "warren-1" || m1.Role != "follower" || m1.CommitIndex != 118 || m1.AppliedIndex != 112 || m1.Lag == nil || *m1.Lag != 5 {
		t.Errorf("warren-1: %v", m1)
	}
	if m2.Node != "warren-2" || m2.Role != "unreachable" || m2.Lag != nil || !strings.Contains(m2.Error, c.addrs["warren-2"]) {
		t.Errorf("warren-2: %v", m2)
	}
}

func TestQuorumStatusWithoutLeader(t *testing.T) {
	c := startCluster(t)
	resp, err := c.client.QuorumStatus(ctx(t), &adminpb.QuorumStatusRequest{Vhost: "billing", Name: "invoices"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Leader != "" || len(resp.Members) != 2 {
		t.Fatalf("leader %q, members %v", resp.Leader, resp.Members)
	}
	if m := resp.Members[0]; m.Role != "candidate" || m.Term != 9 || m.Lag != nil {
		t.Errorf("warren-1: %v", m)
	}
	if m := resp.Members[1]; m.Role != "unreachable" {
		t.Errorf("warren-2: %v", m)
	}
}

func TestQuorumStatusErrors(t *testing.T) {
	c := startCluster(t)
	for _, tc := range []struct {
		vhost, name string
		code        codes.Code
		msg         string
	}{
		{"", "amq.gen-1", codes.FailedPrecondition, "queue 'amq.gen-1' in vhost '/' is not a quorum queue"},
		{"/", "nope", codes.NotFound, "queue 'nope' in vhost '/' not found"},
		{"other", "orders", codes.NotFound, "queue 'orders' in vhost 'other' not found"},
		{"/", "amq.gen-1", codes.FailedPrecondition, "queue 'amq.gen-1' in vhost '/' is not a quorum queue"},
	} {
		_, err := c.client.QuorumStatus(ctx(t), &adminpb.QuorumStatusRequest{Vhost: tc.vhost, Name: tc.name})
		if s := status.Convert(err); s.Code() != tc.code || s.Message() != tc.msg {
			t.Errorf("%s/%s: %v, want %v %q", tc.vhost, tc.name, err, tc.code, tc.msg)
		}
	}
}

func TestMemberStatusWithoutReplica(t *testing.T) {
	c := startCluster(t)
	_, err := c.client.MemberStatus(ctx(t), &adminpb.MemberStatusRequest{QueueId: "q-invoices"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("got %v, want NotFound", err)
	}
}

func TestMemberWaitLeavesTimeToAnswer(t *testing.T) {
	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if d := memberWait(c); d > 500*time.Millisecond || d < 400*time.Millisecond {
		t.Errorf("memberWait with 1s left = %v", d)
	}
	if d := memberWait(context.Background()); d != maxMemberWait {
		t.Errorf("memberWait without deadline = %v", d)
	}
}

// silentListener accepts connections and never answers, like a node that
// hangs.
func silentListener(t *testing.T) string {
	ln := listen(t)
	t.Cleanup(func() { ln.Close() })
	go func() {
		var conns []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	return ln.Addr().String()
}

// A member whose node hangs shows as unreachable in time for the caller's
// deadline, not as a failed call.
func TestQuorumStatusSilentMember(t *testing.T) {
	ln := listen(t)
	b := &fixedBackend{self: "warren-0",
		groups: map[string][]string{"/ orders": {"warren-0", "warren-9"}},
		addrs:  map[string]string{"warren-0": ln.Addr().String(), "warren-9": silentListener(t)},
		local:  map[string]MemberStatus{"q-orders": {Role: RoleLeader, Term: 1, CommitIndex: 5, AppliedIndex: 5, LastLogIndex: 5}}}
	pool := rpc.NewPool()
	g := grpc.NewServer()
	NewServer(b, pool, nil).Register(g)
	go g.Serve(ln)
	t.Cleanup(func() { g.Stop(); pool.Close() })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	resp, err := adminpb.NewAdminClient(conn).QuorumStatus(c, &adminpb.QuorumStatusRequest{Vhost: "/", Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.Members[1]; m.Node != "warren-9" || m.Role != "unreachable" || m.Error == "" {
		t.Errorf("warren-9: %v", m)
	}
	if resp.Leader != "warren-0" || time.Since(start) > 900*time.Millisecond {
		t.Errorf("leader %q after %v", resp.Leader, time.Since(start))
	}
}

func TestPolicies(t *testing.T) {
	c := startCluster(t)
	set := func(p *adminpb.Policy) error {
		_, err := c.client.SetPolicy(ctx(t), &adminpb.SetPolicyRequest{Policy: p})
		return err
	}
	if err := set(&adminpb.Policy{Name: "p", Pattern: "^q", Definition: `{"max-length":2}`, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	if err := set(&adminpb.Policy{Name: "p", Pattern: ".*", Definition: `{"max-length":1}`, Operator: true, ApplyTo: "queues"}); err != nil {
		t.Fatal(err)
	}
	err := set(&adminpb.Policy{Name: "bad", Pattern: ".*", Definition: `[1]`})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "Validation failed") {
		t.Fatalf("refused policy: %v", err)
	}
	resp, err := c.client.ListPolicies(ctx(t), &adminpb.ListPoliciesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Policies) != 1 || resp.Policies[0].Vhost != "/" || resp.Policies[0].ApplyTo != "all" || resp.Policies[0].Priority != 1 {
		t.Fatalf("policies %v (vhost and apply-to default to / and all)", resp.Policies)
	}
	resp, err = c.client.ListPolicies(ctx(t), &adminpb.ListPoliciesRequest{Operator: true})
	if err != nil || len(resp.Policies) != 1 || !resp.Policies[0].Operator {
		t.Fatalf("operator policies %v %v", resp.GetPolicies(), err)
	}
	if _, err := c.client.ClearPolicy(ctx(t), &adminpb.ClearPolicyRequest{Name: "p"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.client.ClearPolicy(ctx(t), &adminpb.ClearPolicyRequest{Name: "p"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("clearing a missing policy: %v", err)
	}
}
