package classic

import (
	"testing"

	"github.com/warrenmq/warren/cluster/queue"
)

func TestConsumersOfEqualPriorityTakeTurns(t *testing.T) {
	q := New("q", Options{})
	a, b, c := &fakeConsumer{}, &fakeConsumer{}, &fakeConsumer{}
	for _, f := range []*fakeConsumer{a, b, c} {
		consume(t, q, f, queue.ConsumeOptions{})
	}
	publish(t, q, 7)
	wantIDs(t, "a", a.ids(), 1, 4, 7)
	wantIDs(t, "b", b.ids(), 2, 5)
	wantIDs(t, "c", c.ids(), 3, 6)
}

func TestConsumersTakeTurnsThroughABacklog(t *testing.T) {
	q := New("q", Options{})
	a, b, c := &fakeConsumer{}, &fakeConsumer{}, &fakeConsumer{}
	for _, f := range []*fakeConsumer{a, b, c} {
		consume(t, q, f, queue.ConsumeOptions{Prefetch: 2})
	}
	publish(t, q, 12)
	// Credit comes back to all three at once: they must still alternate,
	// not drain the backlog one consumer at a time.
	q.Settle([]uint64{1, 2, 3, 4, 5, 6})
	wantIDs(t, "a", a.ids(), 1, 4, 7, 10)
	wantIDs(t, "b", b.ids(), 2, 5, 8, 11)
	wantIDs(t, "c", c.ids(), 3, 6, 9, 12)
}

func TestHigherPriorityConsumerIsServedFirst(t *testing.T) {
	q := New("q", Options{})
	low, high := &fakeConsumer{}, &fakeConsumer{}
	consume(t, q, low, queue.ConsumeOptions{Priority: 1})
	consume(t, q, high, queue.ConsumeOptions{Priority: 5, Prefetch: 2})
	publish(t, q, 4)
	wantIDs(t, "high", high.ids(), 1, 2)
	wantIDs(t, "low (only once high is out of credit)", low.ids(), 3, 4)

	q.Settle([]uint64{1})
	publish(t, q, 1)
	wantIDs(t, "high after a settle", high.ids(), 1, 2, 5)
	wantIDs(t, "low", low.ids(), 3, 4)
}

func TestBlockedHigherPriorityConsumerLetsLowerOnesReceive(t *testing.T) {
	q := New("q", Options{})
	low, high := &fakeConsumer{}, &fakeConsumer{refuse: true}
	consume(t, q, low, queue.ConsumeOptions{Priority: -1})
	consume(t, q, high, queue.ConsumeOptions{Priority: 10})
	publish(t, q, 3)
	wantIDs(t, "high (blocked after its first)", high.ids(), 1)
	wantIDs(t, "low", low.ids(), 2, 3)
}

func TestPrefetchLimitsUnsettledAndSettleReleasesCredit(t *testing.T) {
	q := New("q", Options{})
	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{Prefetch: 2})
	publish(t, q, 5)
	wantIDs(t, "delivered", c.ids(), 1, 2)
	wantStats(t, q, queue.Stats{Ready: 3, Unacked: 2, Consumers: 1})

	q.Settle([]uint64{2})
	wantIDs(t, "after settling one", c.ids(), 1, 2, 3)
	q.Settle([]uint64{1, 3})
	wantIDs(t, "after settling two", c.ids(), 1, 2, 3, 4, 5)
	wantStats(t, q, queue.Stats{Ready: 0, Unacked: 2, Consumers: 1})
}

func TestConsumerAttachingToBacklogGetsUpToPrefetch(t *testing.T) {
	q := New("q", Options{})
	publish(t, q, 10)
	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{Prefetch: 3})
	wantIDs(t, "delivered", c.ids(), 1, 2, 3)
	wantStats(t, q, queue.Stats{Ready: 7, Unacked: 3, Consumers: 1})
}

func TestBlockedConsumerGetsNothingUntilResumed(t *testing.T) {
	q := New("q", Options{})
	c := &fakeConsumer{refuse: true}
	consume(t, q, c, queue.ConsumeOptions{})
	publish(t, q, 3)
	// The refused delivery is still the consumer's: Deliver's false means
	// "no more", not "not this one".
	wantIDs(t, "delivered", c.ids(), 1)
	wantStats(t, q, queue.Stats{Ready: 2, Unacked: 1, Consumers: 1})

	q.Settle([]uint64{1}) // credit alone does not unblock
	wantIDs(t, "after settle", c.ids(), 1)

	c.refuse = false
	q.Resume(c)
	wantIDs(t, "after resume", c.ids(), 1, 2, 3)
	q.Resume(c) // resuming a consumer that is not blocked changes nothing
	wantStats(t, q, queue.Stats{Ready: 0, Unacked: 2, Consumers: 1})
}

func TestBlockedConsumerIsSkippedInTheRoundRobin(t *testing.T) {
	q := New("q", Options{})
	a, b := &fakeConsumer{refuse: true}, &fakeConsumer{}
	consume(t, q, a, queue.ConsumeOptions{})
	consume(t, q, b, queue.ConsumeOptions{})
	publish(t, q, 4)
	wantIDs(t, "a", a.ids(), 1)
	wantIDs(t, "b", b.ids(), 2, 3, 4)
}

func TestNoAckConsumerSettlesOnDeliveryAndIgnoresPrefetch(t *testing.T) {
	q := New("q", Options{})
	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{NoAck: true, Prefetch: 1})
	publish(t, q, 5)
	wantIDs(t, "delivered", c.ids(), 1, 2, 3, 4, 5)
	wantStats(t, q, queue.Stats{Ready: 0, Unacked: 0, Consumers: 1})
	q.Requeue([]uint64{1}, queue.ReturnNack) // settled already: ignored
	wantStats(t, q, queue.Stats{Ready: 0, Unacked: 0, Consumers: 1})
}

func TestDeliveryCarriesTheMessage(t *testing.T) {
	q := New("q", Options{})
	c := &fakeConsumer{}
	consume(t, q, c, queue.ConsumeOptions{})
	publish(t, q, 2)
	if got := string(c.got[1].Message.Body); got != "m1" {
		t.Fatalf("second delivery body = %q, want m1", got)
	}
	if c.got[0].Redelivered {
		t.Fatal("first delivery marked redelivered")
	}
}
