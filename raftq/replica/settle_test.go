package replica

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq"
)

// A consumer with most of its prefetch free acks one message at a time,
// slower than a commit: the acks share log entries instead of taking one
// each, and every message is settled in the end.
func TestSettlesShareEntries(t *testing.T) {
	r := openTest(t, nil, t.TempDir(), nil)
	defer r.Close()
	const n = 60
	enqueue(t, r, n)
	c := &fakeConsumer{}
	if err := r.Consume(c, queue.ConsumeOptions{Prefetch: 1000}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all delivered", func() bool { return len(c.ids()) == n })
	before := r.raft.LastIndex()
	for _, id := range c.ids() {
		r.Settle([]uint64{id})
		time.Sleep(time.Millisecond)
	}
	waitFor(t, "all settled", func() bool { return r.Stats().Unacked == 0 })
	if entries := r.raft.LastIndex() - before; entries > n/3 {
		t.Fatalf("%d acks took %d log entries", n, entries)
	}
	if st := r.Stats(); st.Ready != 0 {
		t.Fatalf("after settling everything: %+v", st)
	}
}

// A consumer at half its prefetch or more has its acks proposed at once:
// the credit they give back is what it waits for.
func TestSettlesOfABusyConsumerDoNotWait(t *testing.T) {
	r := openTest(t, nil, t.TempDir(), nil)
	defer r.Close()
	enqueue(t, r, 4)
	roomy, busy := &fakeConsumer{}, &fakeConsumer{}
	if err := r.Consume(roomy, queue.ConsumeOptions{Prefetch: 10}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "roomy's deliveries", func() bool { return len(roomy.ids()) == 4 })
	r.mu.Lock()
	roomyID := r.byHandle[roomy]
	r.mu.Unlock()
	r.Cancel(roomy) // it keeps its 4 of 10, settleable
	enqueue(t, r, 2)
	if err := r.Consume(busy, queue.ConsumeOptions{Prefetch: 2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "busy's deliveries", func() bool { return len(busy.ids()) == 2 })
	r.mu.Lock()
	busyID := r.byHandle[busy]
	r.mu.Unlock()

	for _, tc := range []struct {
		name    string
		waiting map[raftq.ConsumerID][]uint64
		canWait bool
	}{
		{"nothing waiting", nil, false},
		{"roomy: 4 of 10 held", map[raftq.ConsumerID][]uint64{roomyID: roomy.ids()[:1]}, true},
		{"busy: 2 of 2 held", map[raftq.ConsumerID][]uint64{busyID: busy.ids()[:1]}, false},
		{"both", map[raftq.ConsumerID][]uint64{roomyID: roomy.ids()[:1], busyID: busy.ids()[:1]}, false},
		{"an unknown consumer", map[raftq.ConsumerID][]uint64{busyID + roomyID + 1: {1}}, false},
	} {
		r.mu.Lock()
		r.toSettle = tc.waiting
		r.mu.Unlock()
		if _, got := r.settlesCanWait(nil); got != tc.canWait {
			t.Errorf("%s: can wait %v, want %v", tc.name, got, tc.canWait)
		}
	}
	r.mu.Lock()
	r.toSettle = make(map[raftq.ConsumerID][]uint64)
	r.mu.Unlock()
}
