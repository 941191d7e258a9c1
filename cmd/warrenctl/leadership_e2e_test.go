package main

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestLeadershipAgainstRealCluster runs the leadership commands and the
// health checks against three real nodes, for their exit statuses.
func TestLeadershipAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	args := amqp091.Table{"x-queue-type": "quorum", "x-queue-leader-locator": "client-local"}
	ch := ms[0].Channel()
	for _, q := range []string{"a", "b", "c"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
	}
	node := ms[1].InternalAddr().String()
	testwait.For(t, 20*time.Second, "warren-0 to lead the three", func() bool { return ms[0].LeadingQueues() == 3 })

	code, out, errOut := warrenctl(t, "--node", node, "transfer", "leadership", "a", "warren-2")
	if code != 0 || out != "Moved the leader of queue 'a' in vhost '/' from warren-0 to warren-2.\n" {
		t.Fatalf("transfer: exit %d: %s%s", code, out, errOut)
	}
	code, out, errOut = warrenctl(t, "--node", node, "--json", "rebalance")
	var r rebalanceReport
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || len(r.Moves) != 1 || r.Moves[0].To != "warren-1" {
		t.Fatalf("rebalance: exit %d, %v: %s%s", code, err, out, errOut)
	}
	for _, m := range ms {
		if m.LeadingQueues() != 1 {
			t.Errorf("%s leads %d", m.Name(), m.LeadingQueues())
		}
	}

	for _, check := range [][]string{{"check", "quorum-critical", "warren-0"}, {"check", "leaderless"}} {
		if code, out, errOut := warrenctl(t, append([]string{"--node", node}, check...)...); code != 0 {
			t.Errorf("%v all up: exit %d: %s%s", check, code, out, errOut)
		}
	}
	ms[2].Stop()
	var c checkReport
	testwait.For(t, 20*time.Second, "warren-0 to be quorum critical", func() bool {
		code, out, _ := warrenctl(t, "--node", node, "--json", "check", "quorum-critical", "warren-0")
		return code == 1 && json.Unmarshal([]byte(out), &c) == nil && len(c.Queues) == 3
	})
	if code, out, _ := warrenctl(t, "--node", node, "check", "quorum-critical", "warren-2"); code != 0 {
		t.Errorf("stopped warren-2: exit %d: %s", code, out)
	}
	ms[0].Stop()
	testwait.For(t, 60*time.Second, "every queue leaderless", func() bool {
		code, out, _ := warrenctl(t, "--node", node, "--json", "check", "leaderless")
		if code != 1 || json.Unmarshal([]byte(out), &c) != nil {
			return false
		}
		var names []string
		for _, q := range c.Queues {
			names = append(names, q.Name)
		}
		return slices.Equal(names, []string{"a", "b", "c"})
	})
}
