package server_test

import (
	"fmt"
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestModulusHashExchange: x-modulus-hash (RabbitMQ 4.3's core) sends
// each message to exactly one of its queues, whatever the binding keys,
// the same routing key always to the same queue, and spreads keys over
// all of them; with a queue unbound the keys spread over the rest.
func TestModulusHashExchange(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	must(t, ch.ExchangeDeclare("spread", "x-modulus-hash", true, false, false, false, nil))
	queues := []string{"shard-a", "shard-b", "shard-c"}
	for i, q := range queues {
		_, err := ch.QueueDeclare(q, false, false, false, false, amqp091.Table{"x-queue-type": "classic"})
		must(t, err)
		must(t, ch.QueueBind(q, fmt.Sprint("any-key-", i), "spread", false, nil))
	}
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 400))
	for i := range 300 {
		publish(t, ch, "spread", fmt.Sprint("order-", i%100), amqp091.Publishing{Body: []byte(fmt.Sprint(i % 100))})
	}
	for range 300 {
		if c := <-confirms; !c.Ack {
			t.Fatal("publish nacked")
		}
	}
	where := map[string]string{} // key → queue
	total := 0
	for _, q := range queues {
		got := drainQueue(t, ch, q)
		if len(got) == 0 {
			t.Fatalf("queue %s got none of 100 keys", q)
		}
		total += len(got)
		for _, k := range got {
			if prev, ok := where[k]; ok && prev != q {
				t.Fatalf("key %s went to %s and to %s", k, prev, q)
			}
			where[k] = q
		}
	}
	if total != 300 || len(where) != 100 {
		t.Fatalf("%d messages of 100 keys routed, want 300 of 100, each to one queue", total)
	}

	must(t, ch.QueueUnbind("shard-b", "any-key-1", "spread", nil))
	for i := range 100 {
		publish(t, ch, "spread", fmt.Sprint("order-", i), amqp091.Publishing{Body: []byte("after")})
	}
	for range 100 {
		<-confirms
	}
	a, b, c := len(drainQueue(t, ch, "shard-a")), len(drainQueue(t, ch, "shard-b")), len(drainQueue(t, ch, "shard-c"))
	if b != 0 || a+c != 100 || a == 0 || c == 0 {
		t.Fatalf("after unbinding shard-b: %d, %d, %d", a, b, c)
	}
}

// TestLocalRandomExchange: x-local-random (RabbitMQ 4.3's core) sends
// each message to one of its classic queues, at random; its bindings take
// no key and no quorum queue (406).
func TestLocalRandomExchange(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	must(t, ch.ExchangeDeclare("near", "x-local-random", false, false, false, false, nil))
	queues := []string{"worker-1", "worker-2", "worker-3"}
	for _, q := range queues {
		_, err := ch.QueueDeclare(q, false, false, false, false, amqp091.Table{"x-queue-type": "classic"})
		must(t, err)
		must(t, ch.QueueBind(q, "", "near", false, nil))
	}
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 60))
	for i := range 60 {
		publishBody(t, ch, "near", "ignored", fmt.Sprint(i))
	}
	for range 60 {
		if c := <-confirms; !c.Ack {
			t.Fatal("publish nacked")
		}
	}
	var counts []int
	total := 0
	for _, q := range queues {
		n := len(drainQueue(t, ch, q))
		counts = append(counts, n)
		total += n
	}
	if total != 60 || slices.Max(counts) == 60 {
		t.Fatalf("60 messages spread as %v, want each once and not all to one queue", counts)
	}

	bad := openChannel(t, c)
	wantError(t, bad.QueueBind("worker-1", "k", "near", false, nil), 406, "PRECONDITION_FAILED - Non empty binding 'k' key not permitted")
	bad = openChannel(t, c)
	declareQuorum(t, bad, "durable-worker", nil)
	wantError(t, bad.QueueBind("durable-worker", "", "near", false, nil), 406, "PRECONDITION_FAILED - Queue type rabbit_quorum_queue not valid for this exchange type")
}
