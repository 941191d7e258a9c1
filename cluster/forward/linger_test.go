package forward_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq/linger"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

// Deliveries to a consumer on another node, a message every 2 ms: with a
// delivery linger (20 ms here) the leader's node sends them in several
// times fewer stream messages than without, and the consumer gets every
// one, in order.
func TestDeliveryLingerBatchesForwardedDeliveries(t *testing.T) {
	const n, gap = 100, 2 * time.Millisecond
	replies := func(wait time.Duration) int64 {
		c, rep := twoNodes(t)
		c["b"].srv.SetDeliveryLinger(wait)
		r := c.router(t, "a", "q1", nil, 0)
		tc := &testConsumer{}
		if err := r.Consume(tc, queue.ConsumeOptions{Tag: "c1", Prefetch: 1000}); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 10*time.Second, "consumer attached", func() bool { return rep.Stats().Consumers == 1 })
		before := c["b"].deliveryReplies.Load()
		var conf confirms
		tick := time.NewTicker(gap)
		for i := range n {
			if err := rep.Enqueue(context.Background(), msg(i), conf.done()); err != nil {
				t.Fatal(err)
			}
			<-tick.C
		}
		tick.Stop()
		testwait.For(t, 10*time.Second, "deliveries", func() bool { return tc.count() == n })
		for i, d := range tc.deliveries() {
			if string(d.Message.Body) != fmt.Sprintf("m%d", i) {
				t.Fatalf("linger %v: delivery %d is %q", wait, i, d.Message.Body)
			}
		}
		return c["b"].deliveryReplies.Load() - before
	}
	held, unheld := replies(20*time.Millisecond), replies(0)
	t.Logf("%d deliveries %v apart: %d stream messages with a 20ms linger, %d without", n, gap, held, unheld)
	if held*3 > unheld {
		t.Fatalf("%d stream messages with the linger against %d without: deliveries were not held together", held, unheld)
	}
}

// A consumer on another node with prefetch 1 acknowledges each message
// before it gets the next: no delivery has company, and after a few holds
// that gained nothing the stream stops holding, so the consumer is not
// slowed to one message per linger.
func TestDeliveryLingerLeavesPrefetchOneAlone(t *testing.T) {
	const wait, n = 200 * time.Millisecond, 30
	c, rep := twoNodes(t)
	c["b"].srv.SetDeliveryLinger(wait)
	r := c.router(t, "a", "q1", nil, 0)
	var conf confirms
	publish(t, rep, 0, n, &conf)
	testwait.For(t, 10*time.Second, "confirms", func() bool { ok, _ := conf.counts(); return ok == n })
	tc := &testConsumer{}
	start := time.Now()
	if err := r.Consume(tc, queue.ConsumeOptions{Tag: "c1", Prefetch: 1}); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < n; got++ {
		testwait.For(t, 10*time.Second, "the next delivery", func() bool { return tc.count() > got })
		r.Settle(ids(tc.deliveries()[got : got+1]))
	}
	took := time.Since(start)
	t.Logf("%d deliveries with prefetch 1 in %v", n, took)
	if limit := (linger.Misses + 5) * wait; took > limit {
		t.Fatalf("%d deliveries with prefetch 1 took %v, over %v: the stream kept holding them", n, took, limit)
	}
}
