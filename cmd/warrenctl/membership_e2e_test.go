package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
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
	nodetest.Eventually(t, "the asked node to know the queue", 5*time.Second, func() bool {
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
