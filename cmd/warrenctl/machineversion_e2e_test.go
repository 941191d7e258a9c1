package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestQueueMachineVersionAcrossAnUpgrade: a rolling upgrade, with
// warren-2 standing in for a node on a build from before machine versions
// (it announces none). While it is a member the queue stays at machine
// version 1, and a single active consumer cut off from the leader is
// kept as that build keeps it: not suspended, so what is published
// meanwhile is handed to it, and after the consumer disconnected timeout
// it all goes to the next consumer, counted as a lost consumer's (a
// suspend would have stopped that build). Once warren-2 restarts on the
// new build, the leader raises the queue's version on every member,
// which quorum status shows, and the queue goes on as before; a node
// still on the old build can no longer be added as a member (it would
// stop on the log).
func TestQueueMachineVersionAcrossAnUpgrade(t *testing.T) {
	old := func(c *node.ClusterConfig) {
		if c.NodeName == "warren-2" {
			c.QueueMachineVersion = 1
		}
	}
	ms := nodetest.StartCluster(t, 3, old)
	args := amqp091.Table{"x-queue-type": "quorum", "x-single-active-consumer": true, "x-consumer-disconnected-timeout": int64(3000)}
	if _, err := ms[0].Channel().QueueDeclare("mv", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	leader := queueLeader(t, ms, "mv")
	// The consumer on a node that neither leads nor is the old one; the
	// next consumer on the remaining node.
	victim := ms[0]
	if leader == 0 {
		victim = ms[1]
	}
	asked := ms[3-leader-slices.Index(ms, victim)]
	versions := func(m *nodetest.Member) map[string]uint32 {
		code, out, errOut := warrenctl(t, "--node", m.InternalAddr().String(), "--json", "quorum", "status", "mv")
		if code != 0 {
			t.Fatalf("quorum status: exit %d: %s", code, errOut)
		}
		var r struct{ Members []memberReport }
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		got := map[string]uint32{}
		for _, mr := range r.Members {
			if mr.MachineVersion != nil {
				got[mr.Node] = *mr.MachineVersion
			}
		}
		return got
	}

	consume := func(m *nodetest.Member, tag string) (*amqp091.Channel, <-chan amqp091.Delivery) {
		return consumeFrom(t, m, "mv", tag, 10)
	}
	publish := func(from, to int) { publishLetters(t, ms[leader], "mv", from, to) }
	_, holder := consume(victim, "holder")
	publish(0, 5)
	for range 5 {
		<-holder
	}
	nextCh, next := consume(asked, "next")
	if v := versions(asked); len(v) != 3 || v["warren-0"] != 1 || v["warren-1"] != 1 || v["warren-2"] != 1 {
		t.Fatalf("with warren-2 on the old build: machine versions %v, want 1 on all three", v)
	}

	victim.Kill()
	publish(5, 8)
	// Handed to the holder, kept in its place and not suspended: nothing
	// is ready.
	ready := func() int {
		q, err := asked.Channel().QueueDeclarePassive("mv", true, false, false, false, args)
		if err != nil {
			t.Fatal(err)
		}
		return q.Messages
	}
	testwait.For(t, 5*time.Second, "the three handed to the cut-off holder", func() bool { return ready() == 0 })
	for i := range 8 {
		select {
		case d := <-next:
			if n := d.Headers["x-delivery-count"]; d.Body[0] != byte('a'+i) || !d.Redelivered || n != int64(1) {
				t.Fatalf("delivery %d to the next consumer: %q, redelivered %v, x-delivery-count %v", i, d.Body, d.Redelivered, n)
			}
			d.Ack(false)
		case <-time.After(15 * time.Second):
			t.Fatalf("the next consumer got %d of 8", i)
		}
	}

	// The upgrade: the killed node back, then warren-2 on the new build
	// (its clients go with it: the consumer goes first).
	nextCh.Close()
	victim.Start()
	ms[2].Stop()
	ms[2].Reconfigure(func(c *node.ClusterConfig) { c.QueueMachineVersion = 0 })
	ms[2].Start()
	testwait.For(t, 20*time.Second, "the queue at the new machine version on every member", func() bool {
		v := versions(asked)
		return len(v) == 3 && v["warren-0"] == raftq.MachineVersion && v["warren-1"] == raftq.MachineVersion && v["warren-2"] == raftq.MachineVersion
	})
	publishLetters(t, ms[0], "mv", 8, 10)
	_, after := consume(ms[1], "after")
	for i := 8; i < 10; i++ {
		select {
		case d := <-after:
			if len(d.Body) != 1 || d.Body[0] != byte('a'+i) || d.Redelivered {
				t.Fatalf("after the upgrade: %q, redelivered %v", d.Body, d.Redelivered)
			}
			d.Ack(false)
		case <-time.After(15 * time.Second):
			t.Fatalf("after the upgrade the consumer got %d of 2", i-8)
		}
	}

	// A fourth node on the old build cannot join the queue now.
	nodetest.AddNode(t, "warren-3", ms[0].GossipAddr(), func(c *node.ClusterConfig) { c.QueueMachineVersion = 1 })
	// Until gossip brings warren-3's announcement to the leader, the
	// refusal only says to try again, as an operator would.
	var code int
	var errOut string
	testwait.For(t, 15*time.Second, "warren-3's machine version known where the add is decided", func() bool {
		code, _, errOut = warrenctl(t, "--node", asked.InternalAddr().String(), "add", "member", "mv", "warren-3")
		return code == 0 || !strings.Contains(errOut, "has not announced")
	})
	if code == 0 || !strings.Contains(errOut, "applies queue machine version 1, the queue runs 2") {
		t.Fatalf("add member on the old build: exit %d: %s", code, errOut)
	}
	// grow (and the reconciler, which grows queues the same way) too.
	code, out, errOut := warrenctl(t, "--node", asked.InternalAddr().String(), "grow", "warren-3", "all")
	if all := out + errOut; code == 0 || !strings.Contains(all, "applies queue machine version 1, the queue runs 2") {
		t.Fatalf("grow onto the old build: exit %d: %s", code, all)
	}
	if v := versions(asked); len(v) != 3 {
		t.Fatalf("after the refused add: members %v", v)
	}
}
