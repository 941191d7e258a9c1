package classic

import (
	"context"
	"errors"
	"testing"

	"github.com/warrenmq/warren/cluster/queue"
)

func TestEnqueueNumbersMessagesFromOne(t *testing.T) {
	q := New("q", Options{})
	publish(t, q, 3)
	for want := uint64(1); want <= 3; want++ {
		if d, _, _, _ := q.Get(true); d.ID != want {
			t.Fatalf("Get ID = %d, want %d", d.ID, want)
		}
	}
}

func TestExclusiveConsumer(t *testing.T) {
	q := New("q", Options{})
	a, b, x := &fakeConsumer{}, &fakeConsumer{}, &fakeConsumer{}
	consume(t, q, a, queue.ConsumeOptions{})
	if err := q.Consume(x, queue.ConsumeOptions{Exclusive: true}); !errors.Is(err, queue.ErrExclusiveConsumer) {
		t.Fatalf("exclusive Consume with a consumer attached: %v, want ErrExclusiveConsumer", err)
	}
	q.Cancel(a)
	consume(t, q, x, queue.ConsumeOptions{Exclusive: true})
	if err := q.Consume(b, queue.ConsumeOptions{}); !errors.Is(err, queue.ErrExclusiveConsumer) {
		t.Fatalf("Consume beside an exclusive consumer: %v, want ErrExclusiveConsumer", err)
	}
	if err := q.Consume(b, queue.ConsumeOptions{Exclusive: true}); !errors.Is(err, queue.ErrExclusiveConsumer) {
		t.Fatalf("second exclusive Consume: %v, want ErrExclusiveConsumer", err)
	}
	q.Cancel(x)
	consume(t, q, b, queue.ConsumeOptions{})
	consume(t, q, a, queue.ConsumeOptions{})
}

func TestConsumingTwiceWithTheSameConsumerFails(t *testing.T) {
	q := New("q", Options{})
	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{})
	if err := q.Consume(c, queue.ConsumeOptions{}); !errors.Is(err, ErrAlreadyConsuming) {
		t.Fatalf("second Consume: %v, want ErrAlreadyConsuming", err)
	}
}

func TestOnUnusedFiresOnceWhenTheLastConsumerLeaves(t *testing.T) {
	var q *Queue
	calls := 0
	q = New("q", Options{OnUnused: func() {
		calls++
		q.Stats() // would deadlock if called with the lock held
	}})
	a, b, c := &fakeConsumer{}, &fakeConsumer{}, &fakeConsumer{}
	q.Cancel(a) // never attached: nothing happens
	consume(t, q, a, queue.ConsumeOptions{})
	consume(t, q, b, queue.ConsumeOptions{})
	q.Cancel(a)
	if calls != 0 {
		t.Fatalf("OnUnused called with a consumer still attached")
	}
	q.Cancel(b)
	q.Cancel(b)
	consume(t, q, c, queue.ConsumeOptions{})
	q.Cancel(c)
	if calls != 1 {
		t.Fatalf("OnUnused called %d times, want 1", calls)
	}
}

func TestOnUnusedNeedsAConsumerToHaveAttached(t *testing.T) {
	calls := 0
	q := New("q", Options{OnUnused: func() { calls++ }})
	publish(t, q, 1)
	q.Get(false)
	q.Settle([]uint64{1})
	if _, err := q.Delete(false, false); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("OnUnused called %d times for a queue nobody consumed from", calls)
	}
}

func TestPurgeRemovesReadyMessagesOnly(t *testing.T) {
	q := New("q", Options{})
	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{Prefetch: 2})
	publish(t, q, 5)
	q.Requeue([]uint64{1}, queue.ReturnNack) // redelivered at once: still unsettled
	q.Cancel(c)
	q.Requeue([]uint64{2}, queue.ReturnNack) // now ready again
	n, err := q.Purge()
	if err != nil || n != 4 {
		t.Fatalf("Purge = (%d, %v), want (4, nil)", n, err)
	}
	wantStats(t, q, queue.Stats{Unacked: 1})
	q.Settle([]uint64{1})
	wantStats(t, q, queue.Stats{})
	publish(t, q, 1)
	if d, _, _, _ := q.Get(true); d.ID != 6 {
		t.Fatalf("after purge, next ID = %d, want 6 (IDs are never reused)", d.ID)
	}
}

func TestDeleteIfUnusedAndIfEmpty(t *testing.T) {
	q := New("q", Options{})
	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{Prefetch: 1})
	publish(t, q, 2)
	if _, err := q.Delete(true, false); !errors.Is(err, queue.ErrInUse) {
		t.Fatalf("Delete(ifUnused) with a consumer: %v, want ErrInUse", err)
	}
	q.Cancel(c)
	if _, err := q.Delete(false, true); !errors.Is(err, queue.ErrNotEmpty) {
		t.Fatalf("Delete(ifEmpty) with a ready message: %v, want ErrNotEmpty", err)
	}
	q.Get(true)
	// Only ready messages count for if-empty: message 1 is unacked.
	if n, err := q.Delete(true, true); err != nil || n != 0 {
		t.Fatalf("Delete(ifUnused, ifEmpty) = (%d, %v), want (0, nil)", n, err)
	}
}

func TestDeleteDropsEverythingAndTellsConsumersGone(t *testing.T) {
	var q *Queue
	unused := 0
	q = New("q", Options{OnUnused: func() { unused++ }})
	a, b := &fakeConsumer{}, &fakeConsumer{}
	a.onGone = func() { q.Stats() } // would deadlock if called with the lock held
	consume(t, q, a, queue.ConsumeOptions{Prefetch: 1})
	consume(t, q, b, queue.ConsumeOptions{Prefetch: 1})
	publish(t, q, 5)

	n, err := q.Delete(false, false)
	if err != nil || n != 3 {
		t.Fatalf("Delete = (%d, %v), want (3, nil)", n, err)
	}
	if a.gone != 1 || b.gone != 1 {
		t.Fatalf("Gone calls: a %d, b %d, want 1 each", a.gone, b.gone)
	}
	if unused != 0 {
		t.Fatal("Delete fired OnUnused")
	}
	wantStats(t, q, queue.Stats{})

	// Everything afterwards fails with ErrDeleted or does nothing.
	q.Settle([]uint64{1})
	q.Requeue([]uint64{2}, queue.ReturnConsumerGone)
	q.Discard([]uint64{1}, queue.ReturnReject)
	q.Cancel(a)
	q.Resume(b)
	if _, err := q.Delete(false, false); !errors.Is(err, queue.ErrDeleted) {
		t.Fatalf("second Delete: %v, want ErrDeleted", err)
	}
	if _, err := q.Purge(); !errors.Is(err, queue.ErrDeleted) {
		t.Fatalf("Purge: %v, want ErrDeleted", err)
	}
	if _, _, _, err := q.Get(false); !errors.Is(err, queue.ErrDeleted) {
		t.Fatalf("Get: %v, want ErrDeleted", err)
	}
	if err := q.Consume(&fakeConsumer{}, queue.ConsumeOptions{}); !errors.Is(err, queue.ErrDeleted) {
		t.Fatalf("Consume: %v, want ErrDeleted", err)
	}
	if a.gone != 1 || unused != 0 || len(a.got) != 1 || len(b.got) != 1 {
		t.Fatal("a call after Delete reached a consumer")
	}
	wantStats(t, q, queue.Stats{})
}

func TestEnqueueAfterDeleteFails(t *testing.T) {
	q := New("q", Options{})
	if _, err := q.Delete(false, false); err != nil {
		t.Fatal(err)
	}
	var doneErr error
	calls := 0
	err := q.Enqueue(context.Background(), msg(0), func(err error) { doneErr = err; calls++ })
	if !errors.Is(err, queue.ErrDeleted) || !errors.Is(doneErr, queue.ErrDeleted) || calls != 1 {
		t.Fatalf("Enqueue after Delete = %v, done(%v) %d times; want ErrDeleted from both, done once", err, doneErr, calls)
	}
}

func TestCloseStopsTheQueueQuietly(t *testing.T) {
	unused := 0
	q := New("q", Options{OnUnused: func() { unused++ }})
	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{Prefetch: 1})
	publish(t, q, 3)
	q.Close()
	q.Close()
	if c.gone != 0 || unused != 0 {
		t.Fatalf("Close told the consumer Gone %d times, fired OnUnused %d times; want neither", c.gone, unused)
	}
	wantStats(t, q, queue.Stats{})
	if err := q.Enqueue(context.Background(), msg(0), nil); !errors.Is(err, queue.ErrDeleted) {
		t.Fatalf("Enqueue after Close: %v, want ErrDeleted", err)
	}
	if _, err := q.Delete(false, false); !errors.Is(err, queue.ErrDeleted) {
		t.Fatalf("Delete after Close: %v, want ErrDeleted", err)
	}
	q.Cancel(c)
	if unused != 0 {
		t.Fatal("Cancel after Close fired OnUnused")
	}
}
