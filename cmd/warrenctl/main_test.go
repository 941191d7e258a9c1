package main

import (
	"bytes"
	"encoding/json"
	"net"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/membership"
)

// fixedNode is a node whose state never changes: it holds a replica of
// queue "orders" (group "q-orders") with the given view.
type fixedNode struct {
	name   string
	addrs  map[string]string
	member admin.MemberStatus

	lastSet admin.PolicyInfo
}

var members = []string{"warren-0", "warren-1", "warren-2"}

func (n *fixedNode) Self() string { return n.name }
func (n *fixedNode) Nodes() []admin.NodeInfo {
	var out []admin.NodeInfo
	for i, name := range members {
		st, role := membership.Alive, admin.MetadataRoleVoter
		if i == 0 {
			role = admin.MetadataRoleLeader
		}
		machine := 2
		if i == 2 {
			st = membership.Dead
			machine = 0 // a build from before machine versions
		}
		out = append(out, admin.NodeInfo{Member: membership.Member{Meta: membership.Meta{Name: name,
			AMQP: "127.0.0.1:567" + name[7:], Internal: n.addrs[name], Gossip: "127.0.0.1:794" + name[7:], Version: "0.1.0",
			QueueMachine: machine}, State: st},
			MetadataRole: role})
	}
	return out
}
func (n *fixedNode) MetadataLeader() string { return "warren-0" }
func (n *fixedNode) Queues(vhost string, _ bool) []admin.QueueInfo {
	all := []admin.QueueInfo{
		{Vhost: "/", Name: "orders", Type: "quorum", Leader: "warren-0", Members: members, Online: members[:2], Ready: 7, Unacked: 3, Consumers: 2, DeadLettered: 1, Delayed: 4},
		{Vhost: "billing", Name: "amq.gen-1", Type: "classic", Leader: "warren-1", Members: members[1:2], Online: members[1:2]},
	}
	var out []admin.QueueInfo
	for _, q := range all {
		if vhost == "" || vhost == q.Vhost {
			out = append(out, q)
		}
	}
	return out
}
func (n *fixedNode) QueueGroup(vhost, name string) (string, []string, error) {
	if vhost == "/" && name == "orders" {
		return "q-orders", members, nil
	}
	if vhost == "billing" && name == "amq.gen-1" {
		return "", nil, admin.ErrNotQuorum
	}
	return "", nil, admin.ErrNotFound
}
func (n *fixedNode) LocalMember(id string) (admin.MemberStatus, bool) {
	return n.member, id == "q-orders"
}
func (n *fixedNode) NodeAddr(node string) (string, bool) {
	a, ok := n.addrs[node]
	return a, ok
}

// Policies: one policy and one operator policy; setting any other is
// accepted, a definition that is not an object refused.
func (n *fixedNode) SetPolicy(p admin.PolicyInfo) error {
	if !strings.HasPrefix(p.Definition, "{") {
		return admin.Invalid("definition must be a dictionary: [1]")
	}
	n.lastSet = p
	return nil
}
func (n *fixedNode) ClearPolicy(vhost, name string, operator bool) error {
	if name != "lim" {
		return admin.ErrNotFound
	}
	return nil
}
func (n *fixedNode) Policies(vhost string, operator bool) []admin.PolicyInfo {
	if operator {
		return []admin.PolicyInfo{{Vhost: "/", Name: "cap", Pattern: ".*", ApplyTo: "queues", Definition: `{"max-length":1000}`, Operator: true}}
	}
	return []admin.PolicyInfo{
		{Vhost: "/", Name: "lim", Pattern: "^q", ApplyTo: "all", Definition: `{"max-length":2,"overflow":"reject-publish"}`},
		{Vhost: "/", Name: "ttl", Pattern: ".*", ApplyTo: "quorum_queues", Definition: `{"message-ttl":60000}`, Priority: 5},
	}
}

// startCluster serves warren-0 and warren-1; warren-2's address is a
// closed port. It returns the addresses by node name.
func startCluster(t *testing.T) map[string]string {
	t.Helper()
	var lns []net.Listener
	addrs := map[string]string{}
	for _, name := range members {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs[name] = ln.Addr().String()
	}
	lns[2].Close()
	views := []admin.MemberStatus{
		{Role: admin.RoleLeader, Term: 4, CommitIndex: 120, AppliedIndex: 120, LastLogIndex: 121, SnapshotIndex: 100, MachineVersion: 2},
		{Role: admin.RoleFollower, Term: 4, CommitIndex: 118, AppliedIndex: 112, LastLogIndex: 115, MachineVersion: 1},
	}
	for i := range 2 {
		pool := rpc.NewPool()
		g := grpc.NewServer(rpc.ServerOptions()...)
		admin.NewServer(&fixedNode{name: members[i], addrs: addrs, member: views[i]}, pool, nil).Register(g)
		go g.Serve(lns[i])
		t.Cleanup(func() { g.Stop(); pool.Close() })
	}
	return addrs
}

// warrenctl runs the command line and returns its exit status and output.
func warrenctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// ctlAt returns a warrenctl against the admin service at node that fails
// the test unless the command exits 0, and returns its output.
func ctlAt(t *testing.T, node string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		code, out, errOut := warrenctl(t, append([]string{"--node", node}, args...)...)
		if code != 0 {
			t.Fatalf("warrenctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
}

// columns squeezes runs of spaces, so that tables compare by cells.
func columns(s string) string {
	return regexp.MustCompile(` {2,}`).ReplaceAllString(s, " | ")
}

func TestClusterStatusTable(t *testing.T) {
	addrs := startCluster(t)
	code, out, errOut := warrenctl(t, "--node", addrs["warren-0"], "cluster", "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Log("\n" + out)
	for _, want := range []string{
		"Cluster status as node warren-0 sees it\n",
		"Metadata leader: warren-0\n",
		"Nodes: 3 (2 alive, 1 dead)\n",
		"NODE | STATE | METADATA | AMQP | INTERNAL | GOSSIP | VERSION | MACHINE | ALARMS\n",
		"warren-0 | alive | leader | 127.0.0.1:5670 | " + addrs["warren-0"] + " | 127.0.0.1:7940 | 0.1.0 | 2 | -\n",
		"warren-2 | dead | voter | 127.0.0.1:5672 | " + addrs["warren-2"] + " | 127.0.0.1:7942 | 0.1.0 | - | -\n",
	} {
		if !strings.Contains(columns(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestClusterStatusJSON(t *testing.T) {
	addrs := startCluster(t)
	t.Setenv("WARRENCTL_NODE", addrs["warren-0"])
	code, out, errOut := warrenctl(t, "cluster", "status", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		Node           string
		MetadataLeader string `json:"metadata_leader"`
		Nodes          []map[string]any
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if r.MetadataLeader != "warren-0" || len(r.Nodes) != 3 || r.Nodes[2]["state"] != "dead" || r.Nodes[1]["internal_addr"] != addrs["warren-1"] ||
		r.Nodes[0]["queue_machine"] != float64(2) || r.Nodes[2]["queue_machine"] != nil {
		t.Errorf("got %s", out)
	}
}

func TestListQueues(t *testing.T) {
	addrs := startCluster(t)
	code, out, errOut := warrenctl(t, "list", "queues", "--node", addrs["warren-1"])
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Log("\n" + out)
	want := "VHOST | NAME | TYPE | LEADER | MESSAGES | READY | UNACKED | DLX | DELAYED | CONSUMERS | ONLINE | MEMBERS\n" +
		"/ | orders | quorum | warren-0 | 10 | 7 | 3 | 1 | 4 | 2 | 2/3 | warren-0,warren-1,warren-2\n" +
		"billing | amq.gen-1 | classic | warren-1 | 0 | 0 | 0 | 0 | 0 | 0 | 1/1 | warren-1\n"
	if columns(out) != want {
		t.Errorf("got\n%s\nwant\n%s", columns(out), want)
	}

	code, out, _ = warrenctl(t, "--node", addrs["warren-1"], "--json", "list", "queues", "--vhost", "billing")
	var r struct {
		Queues []struct {
			Name          string
			Messages      uint64
			OnlineMembers []string `json:"online_members"`
		}
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if len(r.Queues) != 1 || r.Queues[0].Name != "amq.gen-1" || len(r.Queues[0].OnlineMembers) != 1 {
		t.Errorf("got %s", out)
	}

	code, out, _ = warrenctl(t, "--node", addrs["warren-1"], "list", "queues", "--vhost", "empty")
	if code != 0 || out != "No queues in vhost 'empty'.\n" {
		t.Errorf("exit %d: %q", code, out)
	}
}

func TestQuorumStatus(t *testing.T) {
	addrs := startCluster(t)
	code, out, errOut := warrenctl(t, "--node", addrs["warren-0"], "quorum", "status", "orders")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Log("\n" + out)
	for _, want := range []string{
		"Status of quorum queue 'orders' in vhost '/' (Raft group q-orders)\n",
		"Leader: warren-0\n",
		"Members: 3 (2 answering, 1 unreachable)\n",
		"NODE | ROLE | TERM | COMMIT | APPLIED | LAST LOG | SNAPSHOT | LAG | MACHINE\n" +
			"warren-0 | leader | 4 | 120 | 120 | 121 | 100 | 0 | 2\n" +
			"warren-1 | follower | 4 | 118 | 112 | 115 | 0 | 5 | 1\n" +
			"warren-2 | unreachable | - | - | - | - | - | - | -\n",
		"\nwarren-2 is unreachable: " + addrs["warren-2"] + ": ",
	} {
		if !strings.Contains(columns(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}

	code, out, _ = warrenctl(t, "--node", addrs["warren-1"], "quorum", "status", "--vhost", "/", "orders", "--json")
	var r struct {
		Leader  string
		Members []struct {
			Node, Role, Error string
			Lag               *uint64
			Term              *uint64
		}
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if r.Leader != "warren-0" || len(r.Members) != 3 || *r.Members[1].Lag != 5 || *r.Members[1].Term != 4 ||
		r.Members[2].Role != "unreachable" || r.Members[2].Lag != nil || r.Members[2].Term != nil || r.Members[2].Error == "" {
		t.Errorf("got %s", out)
	}
}

func TestFailures(t *testing.T) {
	addrs := startCluster(t)
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--node", addrs["warren-2"], "cluster", "status"}, "warrenctl: cannot reach node " + addrs["warren-2"]},
		{[]string{"--node", addrs["warren-0"], "quorum", "status", "nope"}, "warrenctl: queue 'nope' in vhost '/' not found\n"},
		{[]string{"--node", addrs["warren-0"], "quorum", "status", "orders", "--vhost", "billing"}, "warrenctl: queue 'orders' in vhost 'billing' not found\n"},
		{[]string{"--node", addrs["warren-0"], "quorum", "status", "amq.gen-1", "--vhost", "billing"}, "warrenctl: queue 'amq.gen-1' in vhost 'billing' is not a quorum queue\n"},
	} {
		code, out, errOut := warrenctl(t, tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, tc.stderr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and %q", tc.args, code, out, errOut, tc.stderr)
		}
	}
}

// A node that accepts connections but never answers fails the command at
// --timeout.
func TestTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
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
	code, _, errOut := warrenctl(t, "--node", ln.Addr().String(), "--timeout", "300ms", "list", "queues")
	if want := "warrenctl: node " + ln.Addr().String() + " did not answer within 300ms (--timeout)\n"; code != 1 || errOut != want {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // a part of it
		stderr string // a part of it
	}{
		{nil, 2, "", "Usage: warrenctl [flags] <command>"},
		{[]string{"--help"}, 0, "quorum status QUEUE", ""},
		{[]string{"help"}, 0, "Commands:", ""},
		{[]string{"help", "list", "queues"}, 0, "Usage: warrenctl list queues [flags]", ""},
		{[]string{"quorum", "status", "--help"}, 0, "--vhost vhost", ""},
		{[]string{"quorum", "status", "-h"}, 0, "Global flags:", ""},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"cluster"}, 2, "", "did you mean: warrenctl cluster status"},
		{[]string{"quorum", "status"}, 2, "", "quorum status needs QUEUE\nRun 'warrenctl quorum status --help' for usage."},
		{[]string{"quorum", "status", "a", "b"}, 2, "", "unexpected arguments: b"},
		{[]string{"list", "queues", "--bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"--timeout", "soon", "cluster", "status"}, 2, "", "invalid value"},
		{[]string{"cluster", "status", "--timeout", "0s"}, 2, "", "--timeout must be positive"},
	} {
		code, out, errOut := warrenctl(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) ||
			(tc.stdout == "" && out != "") || (tc.stderr == "" && errOut != "") {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q", tc.args, code, out, errOut)
		}
	}
}

// Every command has a summary and help, and its words select it.
func TestCommandTable(t *testing.T) {
	for _, c := range commands {
		if c.summary == "" || c.help == "" || c.setup == nil {
			t.Errorf("%q is incomplete", c.name)
		}
		if got, _ := lookup(strings.Fields(c.name)); got != c {
			t.Errorf("%q does not select itself", c.name)
		}
	}
}

func TestPolicyCommands(t *testing.T) {
	addrs := startCluster(t)
	node := addrs["warren-0"]
	code, out, errOut := warrenctl(t, "--node", node, "set", "policy", "lim", "^q", `{"max-length":2}`, "--priority", "3", "--apply-to", "queues")
	if code != 0 || out != "Set policy 'lim' in vhost '/': pattern '^q', apply-to queues, priority 3, definition {\"max-length\":2}.\n" {
		t.Fatalf("set policy: exit %d: %q %s", code, out, errOut)
	}
	code, _, errOut = warrenctl(t, "--node", node, "set", "operator-policy", "bad", ".*", "[1]")
	if code != 1 || !strings.Contains(errOut, "Validation failed") || !strings.Contains(errOut, "definition must be a dictionary") {
		t.Fatalf("refused policy: exit %d: %s", code, errOut)
	}
	if code, out, _ = warrenctl(t, "--node", node, "clear", "operator-policy", "lim", "--vhost", "v"); code != 0 || out != "Cleared operator policy 'lim' in vhost 'v'.\n" {
		t.Fatalf("clear: exit %d: %q", code, out)
	}
	if code, _, errOut = warrenctl(t, "--node", node, "clear", "policy", "nope"); code != 1 || !strings.Contains(errOut, "Parameter does not exist") {
		t.Fatalf("clear missing: exit %d: %s", code, errOut)
	}
	code, out, _ = warrenctl(t, "--node", node, "list", "policies")
	want := "VHOST | NAME | PATTERN | APPLY-TO | DEFINITION | PRIORITY\n" +
		"/ | lim | ^q | all | {\"max-length\":2,\"overflow\":\"reject-publish\"} | 0\n" +
		"/ | ttl | .* | quorum_queues | {\"message-ttl\":60000} | 5\n"
	if code != 0 || columns(out) != want {
		t.Fatalf("list policies: exit %d:\n%s", code, columns(out))
	}
	code, out, _ = warrenctl(t, "--node", node, "--json", "list", "operator-policies")
	var r struct {
		Operator bool
		Policies []struct {
			Name       string
			ApplyTo    string `json:"apply_to"`
			Definition string
		}
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if !r.Operator || len(r.Policies) != 1 || r.Policies[0].Name != "cap" || r.Policies[0].Definition != `{"max-length":1000}` {
		t.Errorf("operator policies: %s", out)
	}
	if code, _, _ := warrenctl(t, "--node", node, "set", "policy", "x", "y"); code != 2 {
		t.Errorf("set policy without a definition: exit %d, want 2", code)
	}
}
