package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestLocalRandomExchangeAcrossNodes: an x-local-random exchange sends a
// message to a classic queue on the node it was published through: each
// node's publishes stay on that node, and a node without such a queue
// has no route for them (returned, when mandatory), as RabbitMQ 4.3's
// does.
func TestLocalRandomExchangeAcrossNodes(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	if err := ms[0].Channel().ExchangeDeclare("near", "x-local-random", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms[:2] {
		ch := m.Channel()
		q := fmt.Sprintf("worker-on-%d", i)
		if _, err := ch.QueueDeclare(q, false, false, false, false, amqp091.Table{"x-queue-type": "classic"}); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(q, "", "near", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	// publish sends n mandatory messages with confirms through m and
	// says how many came back.
	publish := func(m *nodetest.Member, n int) (returned int) {
		t.Helper()
		ch := m.Channel()
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		returns := ch.NotifyReturn(make(chan amqp091.Return, n))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for range n {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "near", "", true, false, amqp091.Publishing{Body: []byte(m.Name())})
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := dc.WaitContext(ctx); !ok || err != nil {
				t.Fatalf("publish through %s: %v %v", m.Name(), ok, err)
			}
		}
		return len(returns) // each return comes before its confirm
	}
	testwait.For(t, 10*time.Second, "every node knows both bindings", func() bool {
		return publish(ms[0], 1) == 0 && publish(ms[1], 1) == 0
	})
	drain := func(q string) map[string]int {
		got := map[string]int{}
		ch := ms[2].Channel()
		for {
			d, ok, err := ch.Get(q, true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return got
			}
			got[string(d.Body)]++
		}
	}
	drain("worker-on-0")
	drain("worker-on-1")

	for _, m := range ms[:2] {
		if n := publish(m, 10); n != 0 {
			t.Fatalf("%d of 10 publishes through %s returned", n, m.Name())
		}
	}
	if n := publish(ms[2], 5); n != 5 {
		t.Fatalf("%d of 5 publishes through %s, which holds no bound queue, returned", n, ms[2].Name())
	}
	for i, q := range []string{"worker-on-0", "worker-on-1"} {
		if got := drain(q); len(got) != 1 || got[ms[i].Name()] != 10 {
			t.Fatalf("%s holds %v, want the 10 published through %s", q, got, ms[i].Name())
		}
	}
}
