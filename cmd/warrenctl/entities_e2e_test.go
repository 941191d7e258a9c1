package main

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestEntitiesAgainstRealCluster lists, through one node, the exchanges
// and bindings a client declared through another, then purges and deletes
// the client's quorum queue with warrenctl, under the client's eyes.
func TestEntitiesAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	var node string // set below to a node whose member of the queue follows
	ctl := func(args ...string) (int, string, string) {
		t.Helper()
		return warrenctl(t, append([]string{"--node", node}, args...)...)
	}
	ch := ms[1].Channel()
	if err := ch.ExchangeDeclare("events", "topic", true, false, false, false, amqp091.Table{"alternate-exchange": "amq.fanout"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("work", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("work", "a.#", "events", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		t.Helper()
		for range n {
			dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "events", "a.b", false, false, amqp091.Publishing{Body: []byte("m")})
			if err != nil || !dc.Wait() {
				t.Fatalf("publish: %v", err)
			}
		}
	}
	publish(3)
	// Through a follower's node: its member may not have applied the last
	// publishes yet, and the counts must be the leader's all the same.
	testwait.For(t, 10*time.Second, "a follower of queue work", func() bool {
		for _, m := range ms {
			if st, ok := m.QueueMember("/", "work"); ok && st.State == "Follower" {
				node = m.InternalAddr().String()
				return true
			}
		}
		return false
	})

	testwait.For(t, 10*time.Second, "warren-2 to list the exchange and binding", func() bool {
		_, ex, _ := ctl("list", "exchanges", "--vhost", "/")
		_, bd, _ := ctl("list", "bindings", "--vhost", "/")
		return strings.Contains(columns(ex), `/ | 'events' | topic | yes | no | no | {"alternate-exchange":"amq.fanout"}`+"\n") &&
			strings.Contains(columns(ex), "/ | '' | direct | yes | no | no | -\n") &&
			strings.Contains(columns(bd), "/ | 'events' | work | queue | 'a.#' | -\n") &&
			strings.Contains(columns(bd), "/ | '' | work | queue | 'work' | -\n")
	})

	if code, out, errOut := ctl("purge", "queue", "work"); code != 0 || !strings.Contains(out, "Purged 3 message(s) from queue 'work' in vhost '/'.") {
		t.Fatalf("purge: exit %d, %s %s", code, out, errOut)
	}
	publish(2)
	if code, _, errOut := ctl("delete", "queue", "work", "--if-empty"); code != 1 || !strings.Contains(errOut, "not supported by quorum queues") {
		t.Fatalf("delete --if-empty of a quorum queue: exit %d, %s", code, errOut)
	}
	if code, out, errOut := ctl("delete", "queue", "work"); code != 0 || !strings.Contains(out, "Deleted queue 'work' in vhost '/' with 2 message(s).") {
		t.Fatalf("delete: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := ctl("delete", "queue", "work"); code != 1 || !strings.Contains(errOut, "no queue 'work' in vhost '/'") {
		t.Fatalf("delete again: exit %d, %s", code, errOut)
	}
	testwait.For(t, 10*time.Second, "the client's node to forget the queue", func() bool {
		c := ms[1].Channel()
		_, err := c.QueueDeclarePassive("work", true, false, false, false, nil)
		return err != nil && strings.Contains(err.Error(), "NOT_FOUND")
	})
}
