package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq"
)

// consuming opens a queue holding n messages and a consumer with prefetch
// that has been handed them all.
func consuming(t *testing.T, n int, prefetch uint32) (*Replica, *fakeConsumer) {
	t.Helper()
	r := openTest(t, nil, t.TempDir(), nil)
	t.Cleanup(r.Close)
	enqueue(t, r, n)
	c := &fakeConsumer{}
	if err := r.Consume(c, queue.ConsumeOptions{Prefetch: prefetch}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("%d deliveries", n), func() bool { return len(c.ids()) == n })
	return r, c
}

// Acks that come one after another, as a consumer's basic.ack per message
// at a steady rate do, are proposed together: here ten acks half a
// millisecond apart (1,000 msg/s would space them a whole one) take one
// entry, two if the settler's wait ends among them, not ten.
func TestSettlementsGatherIntoOneEntry(t *testing.T) {
	r, c := consuming(t, 10, 256)
	waitFor(t, "the deliveries applied", func() bool { st := r.Stats(); return st.Ready == 0 && st.Unacked == 10 })
	before := r.Status().LastLogIndex
	for _, id := range c.ids() {
		r.Settle([]uint64{id})
		time.Sleep(500 * time.Microsecond)
	}
	waitFor(t, "10 settled", func() bool { return r.Stats().Unacked == 0 })
	if after := r.Status().LastLogIndex; after > before+2 {
		t.Fatalf("10 acks took %d log entries, want 1 or 2", after-before)
	}
}

// How many of a consumer's acks are due at once, on the leader and on the
// consumer's node alike: a quarter of its credit.
func TestSettleDueAt(t *testing.T) {
	for _, tc := range []struct {
		opts queue.ConsumeOptions
		want int
	}{
		{queue.ConsumeOptions{Prefetch: 1}, 1},
		{queue.ConsumeOptions{Prefetch: 4}, 1},
		{queue.ConsumeOptions{Prefetch: 10}, 3},
		{queue.ConsumeOptions{Prefetch: 256}, 64},
		{queue.ConsumeOptions{}, 500},
		{queue.ConsumeOptions{Prefetch: 10, NoAck: true}, 500},
		{queue.ConsumeOptions{Prefetch: 60000}, MaxSettleBatch},
	} {
		if got := SettleDueAt(Credit(tc.opts)); got != tc.want {
			t.Errorf("SettleDueAt(Credit(prefetch %d, no-ack %v)) = %d, want %d", tc.opts.Prefetch, tc.opts.NoAck, got, tc.want)
		}
	}
}

// A settlement holding back a quarter of its consumer's credit is due at
// once: with a small prefetch the next delivery waits for it.
func TestSettlementsDueWhenCreditRunsShort(t *testing.T) {
	r := openTest(t, nil, t.TempDir(), nil)
	defer r.Close()
	small, large := &fakeConsumer{}, &fakeConsumer{}
	for _, c := range []struct {
		c        *fakeConsumer
		prefetch uint32
	}{{small, 4}, {large, 256}} {
		if err := r.Consume(c.c, queue.ConsumeOptions{Prefetch: c.prefetch}); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	smallID, largeID := r.byHandle[small], r.byHandle[large]
	r.mu.Unlock()
	due := func(byConsumer map[uint64]int) bool {
		r.mu.Lock()
		clear(r.toSettle)
		for c, n := range byConsumer {
			for i := range n {
				r.toSettle[raftq.ConsumerID(c)] = append(r.toSettle[raftq.ConsumerID(c)], uint64(i+1))
			}
		}
		r.mu.Unlock()
		return r.settleDue()
	}
	for _, tc := range []struct {
		what  string
		batch map[uint64]int
		want  bool
	}{
		{"nothing", nil, false},
		{"63 of prefetch 256", map[uint64]int{uint64(largeID): 63}, false},
		{"64 of prefetch 256", map[uint64]int{uint64(largeID): 64}, true},
		{"1 of prefetch 4", map[uint64]int{uint64(smallID): 1}, true},
		{"100 of a cancelled consumer's", map[uint64]int{999999: 100}, false},
		{"MaxSettleBatch of a cancelled consumer's", map[uint64]int{999999: MaxSettleBatch}, true},
		{"a basic.get's", map[uint64]int{uint64(r.getter): 1}, true},
	} {
		if got := due(tc.batch); got != tc.want {
			t.Errorf("%s: due %v, want %v", tc.what, got, tc.want)
		}
	}
	r.mu.Lock()
	clear(r.toSettle)
	r.mu.Unlock()
}

// Acks arriving while the settlements are flushed (a cancel's flush, the
// settler's) race with nothing: the race detector watches this one.
func TestSettleWhileFlushing(t *testing.T) {
	r, c := consuming(t, 200, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, id := range c.ids() {
			r.Settle([]uint64{id})
		}
	}()
	for i := 0; i < 2000; i++ {
		r.flushSettlements()
	}
	<-done
	r.flushSettlements()
	waitFor(t, "200 settled", func() bool { return r.Stats().Unacked == 0 })
}
