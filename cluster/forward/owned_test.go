package forward_test

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
	"github.com/warrenmq/warren/raftq/testwait"
)

// A basic.get forwarded to the leader whose answer is lost on the way
// back (the link broke after the get was committed) leaves its message
// checked out to nobody unless the asking node gives it back: it must
// return to the queue and reach the next get, marked redelivered.
func TestLostGetAnswerReturnsTheMessage(t *testing.T) {
	c, rep := twoNodes(t)
	r := c.router(t, "a", "q1", nil, 0)
	var conf confirms
	publish(t, r, 0, 1, &conf)
	testwait.For(t, 10*time.Second, "confirm", func() bool { ok, _ := conf.counts(); return ok == 1 })

	c["b"].loseGetAnswers.Store(1)
	d, _, ok, err := r.Get(false)
	if err != nil || !ok {
		// The retry found the queue empty, or failed: the message went
		// to the lost answer's getter, which the router releases.
		testwait.For(t, 10*time.Second, "the lost get's message back in the queue", func() bool {
			st := rep.Stats()
			return st.Ready == 1 && st.Unacked == 0
		})
		d, _, ok, err = r.Get(false)
	}
	if err != nil || !ok || string(d.Message.Body) != "m0" || !d.Redelivered {
		t.Fatalf("get after the lost answer: %+v ok %v err %v", d, ok, err)
	}
	if st := rep.Stats(); st.Ready != 0 || st.Unacked != 1 {
		t.Fatalf("stats while the channel holds it: %+v", st)
	}
	r.Settle([]uint64{d.ID})
	testwait.For(t, 10*time.Second, "the get settled", func() bool { return rep.Stats() == queue.Stats{} })
}

// Settlements of forwarded gets are sent until the leader takes them: an
// ack and a closing channel's requeue made while the link to the leader
// is cut for longer than any single attempt lasts (opTimeout, 10 s) still
// take effect once it heals. Nothing else would settle or return those
// messages: a getter has no stream whose end returns what it holds.
func TestOwnedSettlementsOutlastACutLink(t *testing.T) {
	t.Parallel() // it mostly waits out timeouts, on its own nodes
	c, rep := twoNodes(t)
	r := c.router(t, "a", "q1", nil, 0)
	var conf confirms
	publish(t, r, 0, 2, &conf)
	testwait.For(t, 10*time.Second, "confirms", func() bool { ok, _ := conf.counts(); return ok == 2 })
	var got []queue.Delivery
	for range 2 {
		d, _, ok, err := r.Get(false)
		if err != nil || !ok {
			t.Fatalf("get: ok %v err %v", ok, err)
		}
		got = append(got, d)
	}

	c["b"].refuseSettles.Store(true)
	r.Settle([]uint64{got[0].ID})
	r.Requeue([]uint64{got[1].ID}, queue.ReturnConsumerGone)
	time.Sleep(12 * time.Second) // longer than one try lasts (opTimeout, 10 s)
	if st := rep.Stats(); st.Unacked != 2 || st.Ready != 0 {
		t.Fatalf("stats with the link cut: %+v", st)
	}
	c["b"].refuseSettles.Store(false)
	testwait.For(t, 15*time.Second, "the ack and the requeue after the link heals", func() bool {
		st := rep.Stats()
		return st.Ready == 1 && st.Unacked == 0
	})
	getRedelivered(t, r, "m1")
}

// lostFirstAck has a consumer attached through node a handed two
// messages by the leader on b, and acknowledge both: the first's
// acknowledgement is lost on the way, the second's arrives.
func lostFirstAck(t *testing.T) (*replica.Replica, *forward.Router, *testConsumer) {
	t.Helper()
	c, rep := twoNodes(t)
	r := c.router(t, "a", "q1", nil, 0)
	tc := &testConsumer{}
	if err := r.Consume(tc, queue.ConsumeOptions{Tag: "c", Prefetch: 10}); err != nil {
		t.Fatal(err)
	}
	var conf confirms
	publish(t, r, 0, 2, &conf)
	testwait.For(t, 10*time.Second, "deliveries", func() bool { return tc.count() == 2 })
	ds := tc.deliveries()

	c["b"].loseStreamSettlements.Store(true)
	r.Settle(ids(ds[:1]))
	// Past the stream's linger (sent, and lost) and its resend window (a
	// stream that ends sends what it sent lately again).
	time.Sleep(500 * time.Millisecond)
	c["b"].loseStreamSettlements.Store(false)
	r.Settle(ids(ds[1:]))
	return rep, r, tc
}

// A consumer whose channel closes may hold a message whose
// acknowledgement was lost (sent to a leader that lost it with its
// leadership): its channel no longer knows of it, so neither the cancel
// nor the channel's requeue returns it. Release returns everything the
// consumer holds once its acknowledgements had time to arrive, as
// RabbitMQ does for a consumer whose channel went down; the
// acknowledgement that did arrive stays applied.
func TestReleasedConsumerReturnsWhatItsLostAckLeft(t *testing.T) {
	rep, r, tc := lostFirstAck(t)
	r.Release(tc)

	testwait.For(t, 10*time.Second, "the message of the lost ack back in the queue", func() bool {
		st := rep.Stats()
		return st.Ready == 1 && st.Unacked == 0 && st.Consumers == 0
	})
	getRedelivered(t, r, "m0")
}

// The same lost acknowledgement, for a consumer cancelled before its
// channel closes (amqp091's ConsumeWithContext sends basic.cancel, then
// the application closes the connection): a cancelled consumer keeps what
// it holds, so the channel's close must release it too, or the message
// stays checked out to nobody for as long as the consumer's node lives
// (jepsen's "stranded").
func TestCancelledConsumerReleasedWithItsChannel(t *testing.T) {
	t.Parallel() // it mostly waits out timeouts, on its own nodes
	rep, r, tc := lostFirstAck(t)
	r.Cancel(tc)
	time.Sleep(2 * time.Second) // a cancel alone returns nothing
	if st := rep.Stats(); st.Ready != 0 || st.Unacked != 1 {
		t.Fatalf("stats after the cancel: %+v", st)
	}
	r.Release(tc) // its channel closes

	testwait.For(t, 10*time.Second, "the message of the lost ack back in the queue", func() bool {
		st := rep.Stats()
		return st.Ready == 1 && st.Unacked == 0 && st.Consumers == 0
	})
	getRedelivered(t, r, "m0")
}

// A node's settlements of a queue travel on the stream of its latest
// delivery, which may be another consumer's: an acknowledgement sent just
// before the channel closes must still be applied before the release
// returns what the consumer holds, or the acknowledged message would be
// delivered again.
func TestReleaseAppliesAcksSentOnAnotherStream(t *testing.T) {
	t.Parallel() // it mostly waits out timeouts, on its own nodes
	c, rep := twoNodes(t)
	r := c.router(t, "a", "q1", nil, 0)
	first, second := &testConsumer{}, &testConsumer{}
	if err := r.Consume(first, queue.ConsumeOptions{Tag: "first", Prefetch: 1}); err != nil {
		t.Fatal(err)
	}
	var conf confirms
	publish(t, r, 0, 1, &conf)
	testwait.For(t, 10*time.Second, "the first consumer's delivery", func() bool { return first.count() == 1 })
	if err := r.Consume(second, queue.ConsumeOptions{Tag: "second", Prefetch: 1}); err != nil {
		t.Fatal(err)
	}
	publish(t, r, 1, 1, &conf)
	testwait.For(t, 10*time.Second, "the second consumer's delivery", func() bool { return second.count() == 1 })

	r.Settle(ids(first.deliveries())) // on the second's stream, lingering
	r.Release(first)
	time.Sleep(2 * time.Second) // past the release's grace
	if st := rep.Stats(); st.Ready != 0 || st.Unacked != 1 || st.Consumers != 1 {
		t.Fatalf("stats after the release: %+v (the acknowledged message came back?)", st)
	}
	if second.count() != 1 {
		t.Fatalf("the second consumer got %d deliveries", second.count())
	}
}

// An acknowledgement that cannot reach the leader for longer than one try
// lasts (opTimeout, 10 s) is sent until it does: dropped, it left the
// message checked out to a consumer whose channel believes it settled,
// using up its prefetch for good (here a cancelled consumer's, whose acks
// go the unary way).
func TestAcksOutlastACutLink(t *testing.T) {
	t.Parallel() // it mostly waits out timeouts, on its own nodes
	c, rep := twoNodes(t)
	r := c.router(t, "a", "q1", nil, 0)
	tc := &testConsumer{}
	if err := r.Consume(tc, queue.ConsumeOptions{Tag: "c", Prefetch: 10}); err != nil {
		t.Fatal(err)
	}
	var conf confirms
	publish(t, r, 0, 1, &conf)
	testwait.For(t, 10*time.Second, "the delivery", func() bool { return tc.count() == 1 })
	r.Cancel(tc) // basic.cancel: the message stays with the channel

	c["b"].refuseSettles.Store(true)
	r.Settle(ids(tc.deliveries()))
	time.Sleep(12 * time.Second) // longer than one try lasts (opTimeout, 10 s)
	if st := rep.Stats(); st.Unacked != 1 {
		t.Fatalf("stats with the link cut: %+v", st)
	}
	c["b"].refuseSettles.Store(false)
	testwait.For(t, 15*time.Second, "the ack after the link heals", func() bool { return rep.Stats() == queue.Stats{} })
}

// getRedelivered takes the next message with basic.get (no ack) and
// expects it to be body, marked redelivered: one that came back.
func getRedelivered(t *testing.T, r *forward.Router, body string) {
	t.Helper()
	d, _, ok, err := r.Get(true)
	if err != nil || !ok || string(d.Message.Body) != body || !d.Redelivered {
		t.Fatalf("get of the returned %s: %+v ok %v err %v", body, d, ok, err)
	}
}

// A consumer whose attach timed out at its node but was applied at the
// leader afterwards (commits stalled meanwhile) is handed messages that no
// channel knows of: the node declares it down once its Consume fails, and
// they come back. Without that, they stayed checked out to a cancelled
// consumer for as long as its node lived (a chaos run stranded 96 so).
func TestConsumerWhoseAttachTimedOutIsReleased(t *testing.T) {
	t.Parallel() // it mostly waits out timeouts, on its own nodes
	c := cluster{"a": newNode(t, "a"), "b": newNode(t, "b")}
	rep := c["b"].openReplicaWith("q1", replica.Config{DisconnectedTimeout: func() time.Duration { return time.Hour }})
	r := c.router(t, "a", "q1", nil, 0)
	var conf confirms
	publish(t, r, 0, 3, &conf)
	testwait.For(t, 10*time.Second, "the confirms", func() bool { ok, _ := conf.counts(); return ok == 3 })

	c["b"].holdConsume.Store(true)
	if err := r.Consume(&testConsumer{}, queue.ConsumeOptions{Tag: "late", Prefetch: 10}); err == nil {
		t.Fatal("the attach the leader held succeeded")
	}
	// The leader applies the attach once the node has given up: the
	// consumer takes the three messages, and its stream is gone.
	testwait.For(t, 10*time.Second, "the late attach to take the messages", func() bool { return rep.Stats().Unacked == 3 })
	testwait.For(t, 10*time.Second, "the messages back in the queue", func() bool {
		st := rep.Stats()
		return st.Ready == 3 && st.Unacked == 0
	})
}
