package node_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// fastReconcile makes the reconciler's rounds and trigger delay short.
func fastReconcile(interval time.Duration) nodetest.Option {
	return func(c *node.ClusterConfig) {
		c.ReconcileInterval = interval
		c.ReconcileDelay = 200 * time.Millisecond
	}
}

// queueMembers is quorum queue name's members in vhost / as m's broker
// records them.
func queueMembers(m *nodetest.Member, name string) []string {
	for _, q := range m.Broker().Queues("/") {
		if q.Record.Name == name {
			return q.Record.Members
		}
	}
	return nil
}

// allVoters reports whether every member of name votes, by m's replica.
func allVoters(m *nodetest.Member, name string, want int) bool {
	servers, ok := m.QueueServers("/", name)
	if !ok || len(servers) != want {
		return false
	}
	for _, v := range servers {
		if !v {
			return false
		}
	}
	return true
}

// A queue with x-quorum-target-group-size 3 that loses a member is grown
// back to three by the metadata leader, without an operator; one with a
// target from a policy grows to it; one without a target (only the
// initial group size) is left as it is, as RabbitMQ does.
func TestReconcileRestoresTargetSize(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3, fastReconcile(300*time.Millisecond))
	if err := ms[0].Broker().SetPolicy(broker.PolicyDef{Vhost: "/", Name: "grow", Pattern: `^pol$`, ApplyTo: "quorum_queues",
		Definition: def(t, `{"target-group-size":3}`)}); err != nil {
		t.Fatal(err)
	}
	ch := ms[0].Channel()
	for name, args := range map[string]amqp091.Table{
		"target": {"x-queue-type": "quorum", "x-quorum-target-group-size": int32(3)},
		"plain":  {"x-queue-type": "quorum"},
		"pol":    {"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(1)},
	} {
		if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 30*time.Second, "pol grown to its policy's target", func() bool {
		return len(queueMembers(ms[0], "pol")) == 3
	})

	for _, name := range []string{"target", "plain"} {
		testwait.For(t, 10*time.Second, name+" has three members", func() bool { return len(queueMembers(ms[0], name)) == 3 })
		if err := ms[0].DeleteMember("/", name, "warren-2", true); err != nil {
			t.Fatalf("delete member of %s: %v", name, err)
		}
	}
	testwait.For(t, 30*time.Second, "target back to three voters", func() bool {
		return slices.Contains(queueMembers(ms[0], "target"), "warren-2") && allVoters(ms[2], "target", 3)
	})
	// Several rounds have run since: the queue without a target stays.
	time.Sleep(time.Second)
	if got := queueMembers(ms[0], "plain"); len(got) != 2 {
		t.Fatalf("plain (no target) has members %v, want two", got)
	}
}

// A node joining the cluster gets a member of every queue below its
// target; the join itself triggers the round (the interval is an hour).
func TestReconcileGrowsOntoJoiningNode(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3, fastReconcile(time.Hour))
	ch := ms[0].Channel()
	args := amqp091.Table{"x-queue-type": "quorum", "x-quorum-target-group-size": int32(3)}
	if _, err := ch.QueueDeclare("orders", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "three members", func() bool { return len(queueMembers(ms[0], "orders")) == 3 })
	ms[2].Stop()
	if err := ms[0].DeleteMember("/", "orders", "warren-2", true); err != nil {
		t.Fatal(err)
	}
	if got := queueMembers(ms[0], "orders"); len(got) != 2 {
		t.Fatalf("members %v, want two", got)
	}
	added := nodetest.AddNode(t, "warren-3", ms[0].GossipAddr(), fastReconcile(time.Hour))
	testwait.For(t, 30*time.Second, "warren-3 a voting member", func() bool {
		return slices.Contains(queueMembers(ms[0], "orders"), "warren-3") && allVoters(added, "orders", 3)
	})
}

// rejoinCluster starts three nodes with opts and rejoinQueues quorum
// queues, stops the third until the others lead every queue, and starts
// it again. It returns the nodes and how many queues a node leads.
func rejoinCluster(t *testing.T, opts ...nodetest.Option) ([]*nodetest.Member, func(*nodetest.Member) int) {
	t.Helper()
	ms := nodetest.StartCluster(t, 3, opts...)
	ch := ms[0].Channel()
	for i := range rejoinQueues {
		if _, err := ch.QueueDeclare(fmt.Sprintf("q%d", i), true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
	}
	leading := func(m *nodetest.Member) int {
		if m.Node == nil {
			return 0
		}
		return m.LeadingQueues()
	}
	total := func() int { return leading(ms[0]) + leading(ms[1]) + leading(ms[2]) }
	testwait.For(t, 10*time.Second, "every queue led", func() bool { return total() == rejoinQueues })
	ms[2].Stop()
	testwait.For(t, 30*time.Second, "the others lead every queue", func() bool { return total() == rejoinQueues })
	ms[2].Start()
	return ms, leading
}

const rejoinQueues = 6

// After a node restarts, the metadata leader spreads the queue leaders
// again (it led none: it handed them off when it stopped).
func TestRebalanceOnRejoin(t *testing.T) {
	t.Parallel()
	ms, leading := rejoinCluster(t, fastReconcile(time.Hour))
	testwait.For(t, 60*time.Second, "leaders spread again", func() bool {
		a, b, c := leading(ms[0]), leading(ms[1]), leading(ms[2])
		return a+b+c == rejoinQueues && max(a, b, c)-min(a, b, c) <= 1
	})
}

// With rebalance on rejoin off (--rebalance-on-rejoin=false), a node that
// restarts leads nothing until an operator rebalances.
func TestNoRebalanceOnRejoin(t *testing.T) {
	t.Parallel()
	ms, leading := rejoinCluster(t, fastReconcile(time.Hour), func(c *node.ClusterConfig) { c.NoRebalanceOnRejoin = true })
	// TestRebalanceOnRejoin's spread comes within seconds of the restart;
	// here the restarted node is to lead nothing for longer than that.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if n := leading(ms[2]); n != 0 {
			t.Fatalf("the restarted node leads %d queues with rebalance on rejoin off", n)
		}
	}
}
