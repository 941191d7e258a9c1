package classic

import (
	"context"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/queue"
)

// ackingConsumer remembers the ID of each delivery so the benchmark can
// settle it, in a slice it reuses.
type ackingConsumer struct{ ids []uint64 }

func (c *ackingConsumer) Deliver(d queue.Delivery) bool {
	c.ids = append(c.ids, d.ID)
	return true
}

func (c *ackingConsumer) Gone() {}

func (c *ackingConsumer) TimedOut(time.Duration) {}

// BenchmarkEnqueueDeliverSettle is the steady state of a busy queue: each
// publish goes straight to a consumer with prefetch 100, which acks in
// batches of 50, as a client with multiple acks would.
func BenchmarkEnqueueDeliverSettle(b *testing.B) {
	q := New("bench", Options{})
	c := &ackingConsumer{ids: make([]uint64, 0, 100)}
	if err := q.Consume(c, queue.ConsumeOptions{Prefetch: 100}); err != nil {
		b.Fatal(err)
	}
	m := &queue.Message{RoutingKey: "k", Body: make([]byte, 64)}
	done := func(error) {}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := q.Enqueue(ctx, m, done); err != nil {
			b.Fatal(err)
		}
		if len(c.ids) == 50 {
			q.Settle(c.ids)
			c.ids = c.ids[:0]
		}
	}
}

// BenchmarkEnqueueGet is basic.publish then basic.get with no-ack, keeping a
// backlog of 1000 so the ring is neither empty nor growing.
func BenchmarkEnqueueGet(b *testing.B) {
	q := New("bench", Options{})
	m := &queue.Message{RoutingKey: "k", Body: make([]byte, 64)}
	done := func(error) {}
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		if err := q.Enqueue(ctx, m, done); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := q.Enqueue(ctx, m, done); err != nil {
			b.Fatal(err)
		}
		if _, _, ok, _ := q.Get(true); !ok {
			b.Fatal("Get: nothing ready")
		}
	}
}

// BenchmarkRequeueBehindBacklog nacks one delivery at a time with 100,000
// never-delivered messages waiting behind it: the cost must not grow with
// the backlog (the requeued message goes into a heap, not into the ring).
func BenchmarkRequeueBehindBacklog(b *testing.B) {
	q := New("bench", Options{})
	m := &queue.Message{RoutingKey: "k", Body: make([]byte, 64)}
	for i := 0; i < 100_000; i++ {
		if err := q.Enqueue(context.Background(), m, nil); err != nil {
			b.Fatal(err)
		}
	}
	c := &ackingConsumer{ids: make([]uint64, 0, 1)}
	if err := q.Consume(c, queue.ConsumeOptions{Prefetch: 1}); err != nil {
		b.Fatal(err)
	}
	ids := make([]uint64, 1)
	b.ReportAllocs()
	for b.Loop() {
		ids[0] = c.ids[0]
		c.ids = c.ids[:0]
		q.Requeue(ids, queue.ReturnNack) // redelivered to c at once
	}
}
