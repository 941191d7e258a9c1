package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestAgainstRealCluster runs warrenctl against three real nodes: the
// cluster's status, its queues and a quorum queue's members, as any node
// answers them.
func TestAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("orders", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		dc, err := ch.PublishWithDeferredConfirm("", "orders", false, false, amqp091.Publishing{Body: []byte("x")})
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
	node := ms[2].InternalAddr().String()

	code, out, errOut := warrenctl(t, "--node", node, "--json", "cluster", "status")
	if code != 0 {
		t.Fatalf("cluster status: exit %d: %s", code, errOut)
	}
	var status struct {
		MetadataLeader string `json:"metadata_leader"`
		Nodes          []struct {
			Name, State  string
			MetadataRole string `json:"metadata_role"`
		}
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Fatal(err)
	}
	if status.MetadataLeader == "" || len(status.Nodes) != 3 {
		t.Fatalf("cluster status: %s", out)
	}
	for _, n := range status.Nodes {
		if n.State != "alive" || n.MetadataRole == "none" {
			t.Errorf("node %+v", n)
		}
	}

	var queues struct {
		Queues []struct {
			Name, Type, Leader string
			Members            []string
			Online             []string `json:"online_members"`
			Messages           uint64
		}
	}
	testwait.For(t, 10*time.Second, "list queues to show the leader", func() bool {
		code, out, errOut = warrenctl(t, "--node", node, "--json", "list", "queues")
		if code != 0 {
			t.Fatalf("list queues: exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &queues); err != nil {
			t.Fatal(err)
		}
		return len(queues.Queues) == 1 && queues.Queues[0].Leader != ""
	})
	q := queues.Queues[0]
	if q.Name != "orders" || q.Type != "quorum" || len(q.Members) != 3 || len(q.Online) != 3 || q.Messages != 5 {
		t.Errorf("list queues: %s", out)
	}

	code, out, errOut = warrenctl(t, "--node", node, "quorum", "status", "orders")
	if code != 0 {
		t.Fatalf("quorum status: exit %d: %s", code, errOut)
	}
	t.Log("\n" + out)
	if strings.Count(out, "leader") < 1 || strings.Count(out, "follower") != 2 {
		t.Errorf("quorum status: want one leader and two followers:\n%s", out)
	}
	if code, _, _ := warrenctl(t, "--node", node, "quorum", "status", "missing"); code != 1 {
		t.Errorf("quorum status of a missing queue: exit %d, want 1", code)
	}

	// A policy set through one node is listed by another once committed.
	code, _, errOut = warrenctl(t, "--node", node, "set", "policy", "lim", "^ord", `{"max-length":3}`, "--apply-to", "quorum_queues")
	if code != 0 {
		t.Fatalf("set policy: exit %d: %s", code, errOut)
	}
	if code, _, errOut = warrenctl(t, "--node", node, "set", "policy", "bad", ".*", `{"max-length":-1}`); code != 1 || !strings.Contains(errOut, "-1 is not a valid maximum length") {
		t.Errorf("invalid policy: exit %d: %s", code, errOut)
	}
	other := ms[0].InternalAddr().String()
	testwait.For(t, 10*time.Second, "the policy on another node", func() bool {
		code, out, _ = warrenctl(t, "--node", other, "list", "policies")
		return code == 0 && strings.Contains(out, "lim") && strings.Contains(out, `{"max-length":3}`)
	})
	if code, out, errOut = warrenctl(t, "--node", other, "clear", "policy", "lim"); code != 0 {
		t.Fatalf("clear policy: exit %d: %s", code, errOut)
	}
}
