package main

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/proto/memberpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestMembershipCommands runs add member and delete member against four
// real nodes: a queue of three members gains the fourth node, loses it
// again, and refuses to drop below a majority without --force.
func TestMembershipCommands(t *testing.T) {
	ms := nodetest.StartCluster(t, 4)
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("orders", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	rec, _ := ms[0].Broker().QueueRecord("/", "orders")
	var outsider string
	for _, m := range ms {
		if !slices.Contains(rec.Members, m.Name()) {
			outsider = m.Name()
		}
	}
	node := ms[1].InternalAddr().String()
	testwait.For(t, 5*time.Second, "the asked node to know the queue", func() bool {
		_, ok := ms[1].Broker().QueueRecord("/", "orders")
		return ok
	})

	code, out, errOut := warrenctl(t, "--node", node, "add", "member", "orders", outsider)
	if code != 0 {
		t.Fatalf("add member: exit %d: %s%s", code, out, errOut)
	}
	code, out, _ = warrenctl(t, "--node", node, "quorum", "status", "orders")
	if code != 0 || !strings.Contains(out, outsider) || strings.Count(out, "follower")+strings.Count(out, "leader") < 4 {
		t.Fatalf("quorum status after add member (exit %d):\n%s", code, out)
	}
	if code, _, _ := warrenctl(t, "--node", node, "add", "member", "orders", outsider); code != 1 {
		t.Errorf("adding an existing member: exit %d, want 1", code)
	}

	code, out, errOut = warrenctl(t, "--node", node, "delete", "member", "orders", outsider)
	if code != 0 {
		t.Fatalf("delete member: exit %d: %s%s", code, out, errOut)
	}

	// Back as a voter at once (--membership voter), with messages to
	// catch up on; the value is checked.
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		dc, err := ch.PublishWithDeferredConfirm("", "orders", false, false, amqp091.Publishing{Body: []byte(strings.Repeat("m", i))})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(t.Context()); !ok || err != nil {
			t.Fatalf("confirm %d: %v %v", i, ok, err)
		}
	}
	for _, bad := range []struct{ value, says string }{{"non_voter", "not supported"}, {"observer", "not recognised"}} {
		code, _, errOut := warrenctl(t, "--node", node, "add", "member", "--membership", bad.value, "orders", outsider)
		if code == 0 || !strings.Contains(errOut, bad.says) {
			t.Errorf("add member --membership %s: exit %d: %s", bad.value, code, errOut)
		}
		code, _, errOut = warrenctl(t, "--node", node, "grow", "--membership", bad.value, outsider, "all")
		if code == 0 || !strings.Contains(errOut, bad.says) {
			t.Errorf("grow --membership %s: exit %d: %s", bad.value, code, errOut)
		}
	}
	outsiderNode := ms[slices.IndexFunc(ms, func(m *nodetest.Member) bool { return m.Name() == outsider })]
	if st, ok := outsiderNode.QueueMember("/", "orders"); ok {
		t.Fatalf("a refused --membership added a member: %+v", st)
	}
	code, out, errOut = warrenctl(t, "--node", node, "add", "member", "--membership", "voter", "orders", outsider)
	if code != 0 {
		t.Fatalf("add member --membership voter: exit %d: %s%s", code, out, errOut)
	}
	if st, ok := outsiderNode.QueueMember("/", "orders"); !ok || !st.Voter {
		t.Fatalf("the voter added: %+v %v", st, ok)
	}
	// It leads with every message.
	if code, out, errOut := warrenctl(t, "--node", node, "transfer", "leadership", "orders", outsider); code != 0 {
		t.Fatalf("transfer leadership to the new voter: exit %d: %s%s", code, out, errOut)
	}
	if q, err := ch.QueueDeclarePassive("orders", true, false, false, false, nil); err != nil || q.Messages != 200 {
		t.Fatalf("the queue led by the new voter: %+v %v", q, err)
	}
	code, out, errOut = warrenctl(t, "--node", node, "delete", "member", "orders", outsider)
	if code != 0 {
		t.Fatalf("delete member after voter: exit %d: %s%s", code, out, errOut)
	}
	// Three members, target three: removing one leaves two, a majority;
	// a second removal would leave one, which needs --force.
	if code, _, errOut := warrenctl(t, "--node", node, "delete", "member", "orders", rec.Members[0]); code != 0 {
		t.Fatalf("delete member down to two: exit %d: %s", code, errOut)
	}
	code, _, errOut = warrenctl(t, "--node", node, "delete", "member", "orders", rec.Members[1])
	if code != 1 || !strings.Contains(errOut, "force") {
		t.Errorf("delete below a majority without --force: exit %d: %s", code, errOut)
	}
}

// TestCheckReplicasSynced: on four real nodes, a queue's fourth member
// left a non-voter (an add member interrupted after the record gained it,
// made here with the same internal calls) fails check replicas-synced for
// its node and passes it for the others; asking add member again
// promotes it, and the check passes.
func TestCheckReplicasSynced(t *testing.T) {
	ms := nodetest.StartCluster(t, 4)
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("orders", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	rec, _ := ms[0].Broker().QueueRecord("/", "orders")
	var outsider *nodetest.Member
	for _, m := range ms {
		if !slices.Contains(rec.Members, m.Name()) {
			outsider = m
		}
	}
	node := ms[0].InternalAddr().String()
	check := func(name string) (int, string, string) {
		return warrenctl(t, "--node", node, "check", "replicas-synced", name)
	}
	if code, out, errOut := check(outsider.Name()); code != 0 || !strings.Contains(out, "has finished its initial sync") {
		t.Fatalf("before: exit %d: %s%s", code, out, errOut)
	}

	// Step 1 of add member on the leader, step 2 in the metadata; never 3
	// and 4.
	var leader string
	testwait.For(t, 10*time.Second, "a leader", func() bool {
		for _, m := range ms {
			if st, ok := m.QueueMember("/", "orders"); ok && st.State == "Leader" {
				leader = m.InternalAddr().String()
			}
		}
		return leader != ""
	})
	conn, err := grpc.NewClient(leader, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := memberpb.NewMemberClient(conn).Change(ctx, &memberpb.ChangeRequest{QueueId: rec.ID,
		Op: memberpb.ChangeOp_ADD_NONVOTER, Node: outsider.Name(), Addr: outsider.InternalAddr().String()})
	if err != nil || reply.NotLeader {
		t.Fatalf("add a non-voter: %v %+v", err, reply)
	}
	members := append(slices.Clone(rec.Members), outsider.Name())
	slices.Sort(members)
	if err := ms[0].Broker().SetQueueMembers("/", "orders", rec.ID, members, rec.Leader); err != nil {
		t.Fatal(err)
	}

	var r struct {
		Passed bool
		Queues []struct {
			Name, Replica string
		}
	}
	testwait.For(t, 10*time.Second, "the non-voter listed", func() bool {
		code, out, _ := warrenctl(t, "--node", node, "--json", "check", "replicas-synced", outsider.Name())
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return code == 1 && !r.Passed && len(r.Queues) == 1 && r.Queues[0].Name == "orders" && r.Queues[0].Replica == "non-voter"
	})
	code, out, _ := check(outsider.Name())
	if code != 1 || !strings.Contains(out, "1 quorum queue replica(s) that have not finished their initial sync") ||
		!strings.Contains(out, "non-voter") {
		t.Errorf("text: exit %d:\n%s", code, out)
	}
	t.Logf("\n%s", out)
	for _, name := range rec.Members {
		if code, out, errOut := check(name); code != 0 {
			t.Errorf("%s: exit %d: %s%s", name, code, out, errOut)
		}
	}

	if code, out, errOut := warrenctl(t, "--node", node, "add", "member", "orders", outsider.Name()); code != 0 {
		t.Fatalf("add member again: exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := check(outsider.Name()); code != 0 {
		t.Errorf("after the promotion: exit %d: %s%s", code, out, errOut)
	}
	if code, _, errOut := check("warren-9"); code != 1 || errOut != "warrenctl: node 'warren-9' is not a cluster member\n" {
		t.Errorf("unknown node: exit %d: %q", code, errOut)
	}
}

// TestGrowStrategies: grow onto a node that joins after three queues were
// declared on the first three: by default only the queue below its target
// size (x-quorum-target-group-size 4) grows, with even the queue of two
// members, with all the queue of three.
func TestGrowStrategies(t *testing.T) {
	noReconcile := func(c *node.ClusterConfig) { c.NoQueueReconcile = true }
	ms := nodetest.StartCluster(t, 3, noReconcile)
	ch := ms[0].Channel()
	for name, args := range map[string]amqp091.Table{
		"three":  {"x-queue-type": "quorum"},
		"two":    {"x-queue-type": "quorum", "x-quorum-initial-group-size": 2},
		"target": {"x-queue-type": "quorum", "x-quorum-target-group-size": 4},
	} {
		if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
	}
	_, port, _ := net.SplitHostPort(ms[0].GossipAddr())
	ms = append(ms, nodetest.AddNode(t, "warren-3", "localhost:"+port, noReconcile))
	addr := ms[0].InternalAddr().String()
	members := func(name string) int {
		rec, _ := ms[0].Broker().QueueRecord("/", name)
		return len(rec.Members)
	}
	grow := func(want string, args ...string) {
		t.Helper()
		var code int
		var out, errOut string
		testwait.For(t, 20*time.Second, "grow "+strings.Join(args, " "), func() bool {
			code, out, errOut = warrenctl(t, append([]string{"--node", addr, "--timeout", "1m", "grow", "warren-3"}, args...)...)
			return code == 0 && strings.Contains(out, want) // the new node may not be placeable yet
		})
		if strings.Count(out, "Added") != 1 {
			t.Errorf("grow %v: exit %d: %s%s", args, code, out, errOut)
		}
	}
	grow("queue //target")
	if members("target") != 4 || members("two") != 2 || members("three") != 3 {
		t.Fatalf("after grow: target %d, two %d, three %d", members("target"), members("two"), members("three"))
	}
	grow("queue //two", "even")
	if members("two") != 3 || members("three") != 3 {
		t.Fatalf("after grow even: two %d, three %d", members("two"), members("three"))
	}
	grow("queue //three", "all")
	if members("three") != 4 {
		t.Fatalf("after grow all: three %d", members("three"))
	}
	code, out, _ := warrenctl(t, "--node", addr, "grow", "warren-3", "all")
	if code != 0 || !strings.Contains(out, "No queue to change") {
		t.Errorf("grow all again: exit %d: %s", code, out)
	}
	if code, _, errOut := warrenctl(t, "--node", addr, "grow", "warren-3", "odd"); code != 1 ||
		errOut != "warrenctl: strategy 'odd' is not recognised (all or even)\n" {
		t.Errorf("grow odd: exit %d: %q", code, errOut)
	}
}

// TestGrowToCount: on four real nodes, grow to-count brings queues of one,
// two and three members to three each, on the nodes holding the fewest
// replicas; even grows none of them then; a pattern selects one queue,
// and a count beyond the nodes stops at four.
func TestGrowToCount(t *testing.T) {
	noReconcile := func(c *node.ClusterConfig) { c.NoQueueReconcile = true }
	ms := nodetest.StartCluster(t, 4, noReconcile)
	ch := ms[0].Channel()
	for name, size := range map[string]int{"one": 1, "two": 2, "three": 3} {
		args := amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": size}
		if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
	}
	addr := ms[0].InternalAddr().String()
	members := func(name string) []string {
		rec, _ := ms[0].Broker().QueueRecord("/", name)
		return rec.Members
	}
	testwait.For(t, 5*time.Second, "the asked node to know the queues", func() bool {
		return len(members("one")) == 1 && len(members("two")) == 2 && len(members("three")) == 3
	})
	ctl := ctlAt(t, addr)

	out := ctl("--timeout", "2m", "grow", "to-count", "3")
	if strings.Count(out, "Added a replica on") != 3 || strings.Count(out, "queue //one") != 2 || strings.Count(out, "queue //two") != 1 {
		t.Fatalf("grow to-count 3:\n%s", out)
	}
	perNode := map[string]int{}
	for _, q := range []string{"one", "two", "three"} {
		mem := members(q)
		if len(mem) != 3 {
			t.Fatalf("%s has members %v after grow to-count 3", q, mem)
		}
		for _, m := range mem {
			perNode[m]++
		}
	}
	lo, hi := 9, 0
	for _, m := range ms {
		lo, hi = min(lo, perNode[m.Name()]), max(hi, perNode[m.Name()])
	}
	if hi-lo > 1 {
		t.Fatalf("replicas per node after grow to-count: %v", perNode)
	}

	if out := ctl("grow", "to-count", "4", "even"); out != "No queue to grow to 4 members.\n" {
		t.Fatalf("grow to-count 4 even with every queue at three: %q", out)
	}
	ctl("--timeout", "2m", "grow", "to-count", "4", "--queue-pattern", "^one$")
	if len(members("one")) != 4 || len(members("two")) != 3 {
		t.Fatalf("after grow to-count 4 of one: one %v, two %v", members("one"), members("two"))
	}
	var rep membershipReport
	if err := json.Unmarshal([]byte(ctl("--json", "--timeout", "2m", "grow", "to-count", "9", "--queue-pattern", "^two$")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Changed) != 1 || len(rep.AddedOn) != 1 || !slices.Contains(members("two"), rep.AddedOn[0]) || len(members("two")) != 4 {
		t.Fatalf("grow to-count 9 of two on four nodes: %+v, members %v", rep, members("two"))
	}
	if code, _, errOut := warrenctl(t, "--node", addr, "grow", "to-count", "0"); code != 1 || !strings.Contains(errOut, "greater than 0") {
		t.Fatalf("grow to-count 0: exit %d: %s", code, errOut)
	}
	// Straight after the membership changes, every member, the new ones
	// too, takes a checkpoint (raft refuses one while a configuration
	// entry it holds is not applied).
	if code, out, errOut := warrenctl(t, "--node", addr, "--timeout", "1m", "force", "checkpoint", "--errors-only"); code != 0 ||
		out != "Every member took its checkpoint.\n" {
		t.Fatalf("force checkpoint after growing: exit %d:\n%s%s", code, out, errOut)
	}
}
