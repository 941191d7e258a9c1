package classic

import (
	"testing"

	"github.com/warrenmq/warren/cluster/queue"
)

func TestRequeuedMessagesComeBackFirstInIDOrderMarkedRedelivered(t *testing.T) {
	q := New("q", Options{})
	publish(t, q, 6)
	for i := 0; i < 5; i++ {
		if _, _, ok, _ := q.Get(false); !ok {
			t.Fatal("Get: nothing ready")
		}
	}
	q.Requeue([]uint64{4, 2}, queue.ReturnNack)
	q.Requeue([]uint64{5, 1}, queue.ReturnReject)
	wantStats(t, q, queue.Stats{Ready: 5, Unacked: 1})

	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{})
	wantIDs(t, "order", c.ids(), 1, 2, 4, 5, 6)
	for _, d := range c.got {
		if want := d.ID != 6; d.Redelivered != want {
			t.Fatalf("message %d: Redelivered = %v, want %v", d.ID, d.Redelivered, want)
		}
	}
}

func TestRequeueGoesAheadOfMessagesPublishedLater(t *testing.T) {
	q := New("q", Options{})
	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{Prefetch: 1})
	publish(t, q, 3)
	wantIDs(t, "delivered", c.ids(), 1)
	q.Requeue([]uint64{1}, queue.ReturnNack)
	wantIDs(t, "redelivered at once", c.ids(), 1, 1)
	if !c.got[1].Redelivered {
		t.Fatal("requeued message not marked redelivered")
	}
}

func TestSettleAndRequeueIgnoreUnknownAndSettledIDs(t *testing.T) {
	q := New("q", Options{})
	publish(t, q, 2)
	d, _, _, _ := q.Get(false)
	q.Settle([]uint64{d.ID, d.ID, 99})
	q.Requeue([]uint64{d.ID, 0, 42}, queue.ReturnNack)
	q.Discard([]uint64{d.ID, 7}, queue.ReturnNack)
	wantStats(t, q, queue.Stats{Ready: 1})
}

func TestDiscardDropsTheMessageAndFreesCredit(t *testing.T) {
	q := New("q", Options{})
	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{Prefetch: 1})
	publish(t, q, 2)
	q.Discard([]uint64{1}, queue.ReturnReject)
	wantIDs(t, "delivered", c.ids(), 1, 2)
	wantStats(t, q, queue.Stats{Ready: 0, Unacked: 1, Consumers: 1})
}

func TestCancelledConsumersDeliveriesStayUnsettled(t *testing.T) {
	q := New("q", Options{})
	a, b := &fakeConsumer{}, &fakeConsumer{}
	consume(t, q, a, queue.ConsumeOptions{Prefetch: 2})
	publish(t, q, 3)
	q.Cancel(a)
	wantStats(t, q, queue.Stats{Ready: 1, Unacked: 2})

	q.Settle([]uint64{1}) // settling by ID still works, and a gets nothing
	wantIDs(t, "a", a.ids(), 1, 2)
	wantStats(t, q, queue.Stats{Ready: 1, Unacked: 1})

	consume(t, q, b, queue.ConsumeOptions{})
	q.Requeue([]uint64{2}, queue.ReturnConsumerGone) // channel closed
	wantIDs(t, "b", b.ids(), 3, 2)
	wantStats(t, q, queue.Stats{Unacked: 2, Consumers: 1})
}

func TestGetFromTheQueueAndRemaining(t *testing.T) {
	q := New("q", Options{})
	if _, remaining, ok, err := q.Get(false); ok || err != nil || remaining != 0 {
		t.Fatalf("Get on empty queue = (%d, %v, %v), want (0, false, nil)", remaining, ok, err)
	}
	publish(t, q, 3)

	d, remaining, ok, err := q.Get(true)
	if !ok || err != nil || d.ID != 1 || remaining != 2 || d.Redelivered {
		t.Fatalf("Get(noAck) = (%+v, %d, %v, %v)", d, remaining, ok, err)
	}
	wantStats(t, q, queue.Stats{Ready: 2}) // no-ack: gone, not unacked

	d, remaining, _, _ = q.Get(false)
	if d.ID != 2 || remaining != 1 {
		t.Fatalf("Get = (%d, %d), want (2, 1)", d.ID, remaining)
	}
	wantStats(t, q, queue.Stats{Ready: 1, Unacked: 1})
	q.Requeue([]uint64{2}, queue.ReturnReject)
	d, remaining, _, _ = q.Get(false)
	if d.ID != 2 || !d.Redelivered || remaining != 1 {
		t.Fatalf("Get after requeue = (%+v, %d), want message 2 redelivered, 1 left", d, remaining)
	}
	q.Settle([]uint64{2})
	wantStats(t, q, queue.Stats{Ready: 1})
}
