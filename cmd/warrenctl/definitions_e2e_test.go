package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestDefinitionsAgainstRealCluster imports, through one node of three, a
// definitions document exported by a real RabbitMQ 3.10.8, uses what it
// defines from a real client on another node (its user's RabbitMQ password
// hash, its exchanges, bindings and alternate exchange, its quorum
// queue), exports the cluster's definitions through the third and imports
// that back through standard input.
func TestDefinitionsAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	code, out, errOut := warrenctl(t, "--node", ms[0].InternalAddr().String(), "import", "definitions", "../../cluster/broker/testdata/rabbitmq-3.10.8-definitions.json")
	if code != 1 || !strings.Contains(out, "Imported 2 users, 2 vhosts, 3 permissions, 1 policies, 1 operator policies, 4 exchanges, 3 queues, 4 bindings.") ||
		!strings.Contains(out, "1 topic permission(s) not imported") {
		t.Fatalf("import: exit %d (want 1: the topic permission), %s %s", code, out, errOut)
	}

	var conn *amqp091.Connection
	testwait.For(t, 10*time.Second, "alice, with RabbitMQ's password hash, to open vhost orders on warren-2", func() bool {
		c, err := amqp091.Dial(fmt.Sprintf("amqp://alice:s3cret@%s/orders", ms[2].AMQPAddr()))
		conn = c
		return err == nil
	})
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []struct{ exchange, key string }{{"orders.events", "order.created.eu"}, {"orders.in", "unmatched"}} {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, p.key, true, false, amqp091.Publishing{Body: []byte(p.exchange)})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("publish to %s: %v %v", p.exchange, ok, err)
		}
	}
	for queue, body := range map[string]string{"orders.created": "orders.events", "orders.audit": "orders.in"} {
		var d amqp091.Delivery
		testwait.For(t, 10*time.Second, "a message in "+queue, func() bool {
			m, ok, err := ch.Get(queue, true)
			d = m
			return err == nil && ok
		})
		if string(d.Body) != body {
			t.Fatalf("%s holds %q, want %q", queue, d.Body, body)
		}
	}

	// What clients declare for themselves: a transient exchange and a
	// non-durable queue, which an export holds (as RabbitMQ 4.3's does),
	// and an exclusive queue bound to a durable exchange, which it
	// leaves out with its binding (an import could not declare them).
	for _, step := range []func() error{
		func() error { return ch.ExchangeDeclare("orders.local", "fanout", false, false, false, false, nil) },
		func() error {
			_, err := ch.QueueDeclare("orders.scratch", false, false, false, false, amqp091.Table{"x-queue-type": "classic"})
			return err
		},
		func() error { return ch.QueueBind("orders.scratch", "", "orders.local", false, nil) },
		func() error {
			_, err := ch.QueueDeclare("orders.mine", false, false, true, false, nil)
			return err
		},
		func() error { return ch.QueueBind("orders.mine", "#", "orders.events", false, nil) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	// Export through warren-1 to standard output: the whole topology.
	code, out, errOut = warrenctl(t, "--node", ms[1].InternalAddr().String(), "export", "definitions", "-")
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	var doc struct {
		Users []struct {
			Name         string
			PasswordHash string `json:"password_hash"`
		}
		Bindings []struct {
			Source, Destination string
			Type                string `json:"destination_type"`
		}
		Queues []struct {
			Name, Type string
			Durable    bool
		}
		Exchanges []struct {
			Name    string
			Durable bool
		}
		Parameters []struct{ Component, Name string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("export is not JSON: %v\n%s", err, out)
	}
	if len(doc.Users) != 2 || len(doc.Bindings) != 5 || len(doc.Queues) != 4 || len(doc.Exchanges) != 5 || len(doc.Parameters) != 1 || doc.Parameters[0].Component != "operator_policy" {
		t.Fatalf("exported %+v", doc)
	}
	for _, q := range doc.Queues {
		if q.Name == "orders.mine" || q.Name == "orders.scratch" && (q.Durable || q.Type != "classic") {
			t.Fatalf("exported queue %+v", q)
		}
	}
	for _, x := range doc.Exchanges {
		if x.Name == "orders.local" && x.Durable {
			t.Fatalf("exported exchange %+v", x)
		}
	}
	for _, b := range doc.Bindings {
		if b.Destination == "orders.mine" {
			t.Fatalf("exported the binding of an exclusive queue: %+v", b)
		}
	}
	if !strings.Contains(out, `"destination_type": "exchange"`) || !strings.Contains(out, `"alternate-exchange": "orders.alt"`) {
		t.Fatalf("the export lacks the exchange-to-exchange binding or the alternate exchange:\n%s", out)
	}

	// The export imports back cleanly (through standard input).
	stdinReader = strings.NewReader(out)
	defer func() { stdinReader = os.Stdin }()
	code, out, errOut = warrenctl(t, "--node", ms[2].InternalAddr().String(), "import", "definitions", "-")
	if code != 0 || !strings.Contains(out, "Imported 2 users") {
		t.Fatalf("re-import: exit %d, %s %s", code, out, errOut)
	}
}
