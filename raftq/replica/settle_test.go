package replica

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
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
	testwait.For(t, 5*time.Second, fmt.Sprintf("%d deliveries", n), func() bool { return len(c.ids()) == n })
	return r, c
}

// Acks that come one after another, as a consumer's basic.ack per message
// at a steady rate do, are proposed together: here ten acks half a
// millisecond apart (1,000 msg/s would space them a whole one) take one
// entry, two if the settler's wait ends among them, not ten.
func TestSettlementsGatherIntoOneEntry(t *testing.T) {
	r, c := consuming(t, 10, 256)
	testwait.For(t, 5*time.Second, "the deliveries applied", func() bool { st := r.Stats(); return st.Ready == 0 && st.Unacked == 10 })
	before := r.Status().LastLogIndex
	for _, id := range c.ids() {
		r.Settle([]uint64{id})
		time.Sleep(500 * time.Microsecond) // the acks' spacing under test
	}
	testwait.For(t, 5*time.Second, "10 settled", func() bool { return r.Stats().Unacked == 0 })
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
	r.consumers.mu.Lock()
	smallID, largeID := r.consumers.byHandle[small], r.consumers.byHandle[large]
	r.consumers.mu.Unlock()
	due := func(byConsumer map[uint64]int) bool {
		r.consumers.mu.Lock()
		clear(r.consumers.toSettle)
		for c, n := range byConsumer {
			for i := range n {
				r.consumers.toSettle[raftq.ConsumerID(c)] = append(r.consumers.toSettle[raftq.ConsumerID(c)], uint64(i+1))
			}
		}
		r.consumers.mu.Unlock()
		return r.consumers.settleDue()
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
	r.consumers.mu.Lock()
	clear(r.consumers.toSettle)
	r.consumers.mu.Unlock()
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
		r.settler.flush()
	}
	<-done
	r.settler.flush()
	testwait.For(t, 5*time.Second, "200 settled", func() bool { return r.Stats().Unacked == 0 })
}

// Acks gathered when a leadership transfer is asked for (a rebalance, a
// drain, a node's graceful stop) go into the log before the transfer
// starts: raft refuses entries during a transfer and the new leader knows
// nothing of this one's deliveries, so acks left in hand would hand their
// messages out again.
func TestHandOffSettlesGatheredAcks(t *testing.T) { eachStorage(t, testHandOffSettlesGatheredAcks) }

func testHandOffSettlesGatheredAcks(t *testing.T, st storage) {
	g := newGroup(t, st)
	_, lead := g.leader()
	c := &movable{lost: make(chan struct{}, 1)}
	if err := lead.Consume(c, queue.ConsumeOptions{Prefetch: 256}); err != nil {
		t.Fatal(err)
	}
	publish(t, lead, 0, 10)
	testwait.For(t, 5*time.Second, "10 deliveries", func() bool { return len(c.ids()) == 10 })
	lead.Settle(c.ids()) // 10 of prefetch 256: gathered, not due
	if err := lead.HandOff(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	n, next := g.leader()
	if next == lead {
		t.Fatal("the leadership did not move")
	}
	testwait.For(t, 5*time.Second, "the new leader caught up", func() bool { return next.Status().AppliedIndex >= lead.Status().CommitIndex })
	if st := next.Stats(); st.Unacked != 0 || st.Ready != 0 {
		t.Fatalf("new leader %s: %d unacked, %d ready; want the 10 acked messages settled", n, st.Unacked, st.Ready)
	}
}

// consumedThenMoved attaches a consumer with opts to g's leader, has it
// handed 10 messages, and moves the leadership to another member; it
// returns the old leader, the new one and the consumer.
func consumedThenMoved(t *testing.T, g *group, opts queue.ConsumeOptions) (old, next *Replica, c *movable) {
	t.Helper()
	_, old = g.leader()
	c = &movable{lost: make(chan struct{}, 1)}
	if err := old.Consume(c, opts); err != nil {
		t.Fatal(err)
	}
	publish(t, old, 0, 10)
	testwait.For(t, 5*time.Second, "10 deliveries", func() bool { return len(c.ids()) == 10 })
	if err := old.HandOff(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	<-c.lost
	_, next = g.leader()
	if next == old {
		t.Fatal("the leadership did not move")
	}
	return old, next, c
}

// Acks of a former leader's deliveries that reach it after the leadership
// moved are passed on to the new leader (Config.SettleAtLeader), which
// settles them; the messages acked nowhere come back once OrphanGrace is
// over.
func TestFormerLeaderPassesAcksOn(t *testing.T) { eachStorage(t, testFormerLeaderPassesAcksOn) }

func testFormerLeaderPassesAcksOn(t *testing.T, st storage) {
	var g *group
	g = newGroupWith(t, st, func(_ string, cfg *Config) {
		cfg.SettleAtLeader = passToLeader(t, &g)
	})
	old, next, c := consumedThenMoved(t, g, queue.ConsumeOptions{Prefetch: 256})
	ids := c.ids()
	old.Settle(ids[:6])                     // acked after the move
	old.Requeue(ids[6:7], queue.ReturnNack) // nacked with requeue
	// The new leader holds nothing back for the consumer it never saw...
	testwait.For(t, 5*time.Second, "6 settled and 1 requeued at the new leader", func() bool {
		st := next.Stats()
		return st.Unacked == 3 && st.Ready == 1
	})
	// ...and returns what it held once the grace is over.
	testwait.For(t, 20*time.Second, "the 3 unacknowledged messages back in the queue", func() bool {
		st := next.Stats()
		return st.Unacked == 0 && st.Ready == 4
	})
}

// A consumer that attaches to the new leader under its ID keeps the
// messages the old leader handed it, past OrphanGrace, and the new leader
// settles those deliveries by the IDs the old one gave them: a delivery's
// ID is the machine's, the same on every member. Deliveries it says it
// never received come back to the queue, and to it, first.
func TestConsumerFollowsTheLeaderWithItsMessages(t *testing.T) {
	eachStorage(t, testConsumerFollowsTheLeaderWithItsMessages)
}

func testConsumerFollowsTheLeaderWithItsMessages(t *testing.T, st storage) {
	g := newGroupWith(t, st, func(_ string, cfg *Config) {
		cfg.SettleAtLeader = func([]HeldSettlement) {} // a member passing settlements on exists
	})
	const id = 0x5eed0001
	_, next, c := consumedThenMoved(t, g, queue.ConsumeOptions{Prefetch: 10, ID: id})
	// As if the last 3 deliveries had been lost on the way.
	received := c.ids()[:7]
	again := &movable{lost: make(chan struct{}, 1)}
	if err := next.Consume(again, queue.ConsumeOptions{Prefetch: 10, ID: id, LastDelivery: received[6]}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the 3 lost deliveries made again", func() bool { return len(again.ids()) == 3 })
	for i, m := range again.deliveries() {
		if want := fmt.Sprintf("m%d", 7+i); string(m.Message.Body) != want || !m.Redelivered {
			t.Fatalf("delivery %d at the new leader: %q redelivered=%v, want %s redelivered", i, m.Message.Body, m.Redelivered, want)
		}
	}
	publish(t, next, 10, 5) // the consumer's credit is spent: they wait
	// Past the grace, when an orphan's deliveries would go back.
	time.Sleep(OrphanGrace + time.Second)
	if st := next.Stats(); st.Unacked != 10 || st.Ready != 5 {
		t.Fatalf("after the grace: %d unacked, %d ready; want the consumer to keep its 10", st.Unacked, st.Ready)
	}
	if n := len(again.ids()); n != 3 {
		t.Fatalf("%d deliveries at the new leader before any ack; want 3", n)
	}
	if got, want := next.Deliveries(id), append(slices.Clone(received), again.ids()...); !slices.Equal(got, want) {
		t.Fatalf("the new leader lists deliveries %v, want %v", got, want)
	}
	next.Settle(received[:4]) // the old leader's IDs, settled at the new one
	testwait.For(t, 5*time.Second, "4 settled, 4 more delivered", func() bool {
		st := next.Stats()
		return st.Unacked == 10 && st.Ready == 1 && len(again.ids()) == 7
	})
	for _, d := range again.ids() {
		if slices.Contains(c.ids(), d) {
			t.Fatalf("delivery ID %d handed out twice", d)
		}
	}
}

// passDeliveriesToLeader is a Config.SettleDeliveriesAtLeader that hands
// settlements by delivery ID to the group's leader, as the router does;
// *g is set once the group is made.
func passDeliveriesToLeader(g **group) func(raftq.Op, queue.ReturnCause, []uint64) {
	return func(op raftq.Op, cause queue.ReturnCause, ids []uint64) {
		go func() {
			_, lead := (*g).leader()
			lead.settler.byOp(op, cause, ids)
		}()
	}
}

// A member behind the log does not know the deliveries its leader made
// since; settlements of them that reach it (a router whose leader was
// stale, a new leader's stream ended by a quick second change) go on to
// the leader by delivery ID. Dropped, they left acknowledged messages
// checked out to their consumer, and rejected ones neither requeued nor
// dead-lettered, until the consumer's channel closed.
func TestLaggingMemberPassesUnknownSettlementsOn(t *testing.T) {
	var g *group
	g = newGroupWith(t, sharedLog, func(_ string, cfg *Config) {
		cfg.SettleAtLeader = passToLeader(t, &g)
		cfg.SettleDeliveriesAtLeader = passDeliveriesToLeader(&g)
	})
	ln, lead := g.leader()
	var behind string
	for _, n := range g.names {
		if n != ln {
			behind = n
		}
	}
	for _, n := range g.names {
		if n != behind {
			g.cut(n, behind)
		}
	}
	c := &fakeConsumer{}
	if err := lead.Consume(c, queue.ConsumeOptions{Prefetch: 10}); err != nil {
		t.Fatal(err)
	}
	publish(t, lead, 0, 10)
	testwait.For(t, 5*time.Second, "10 deliveries", func() bool { return len(c.ids()) == 10 })
	ids := c.ids()

	lagging := g.members[behind]
	lagging.Settle(ids[:6])
	lagging.Requeue(ids[6:7], queue.ReturnNack)
	// The requeued message goes to the consumer again.
	testwait.For(t, 5*time.Second, "6 settled and 1 requeued at the leader", func() bool {
		return lead.Stats().Unacked == 4 && len(c.ids()) == 11
	})
}

// A new leader that has not applied its predecessors' entries holds the
// settlements of deliveries it does not know yet, however many, on one
// waiting goroutine, and settles them once it has applied them.
func TestUnappliedLeaderSettlesOnceApplied(t *testing.T) {
	r, c := consuming(t, 6, 10)
	ids := c.ids()
	r.leaderApplied.Store(false) // as just after an election
	for i := range 3 {
		// As byHolder reports deliveries handed out in entries not
		// applied yet.
		r.settler.unknown(raftq.OpSettle, 0, ids[2*i:2*i+2])
	}
	time.Sleep(100 * time.Millisecond) // time for a wrongful settlement to apply: nothing to wait on
	if st := r.Stats(); st.Unacked != 6 {
		t.Fatalf("settled before the leader applied its log: %+v", st)
	}
	r.settler.unapplied.mu.Lock()
	held := len(r.settler.unapplied.list)
	r.settler.unapplied.mu.Unlock()
	if held != 3 {
		t.Fatalf("%d settlements held, want 3", held)
	}
	r.leaderApplied.Store(true)
	testwait.For(t, 5*time.Second, "the held settlements applied", func() bool { return r.Stats().Unacked == 0 })
}
