package forward_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
	"github.com/warrenmq/warren/raftq/testwait"
)

// disconnectedSetup is a queue on b whose consumer disconnected timeout
// is timeout, and a consumer on a holding five deliveries through a
// consume stream.
func disconnectedSetup(t *testing.T, timeout time.Duration) (cluster, *replica.Replica, *forward.Router, *testConsumer) {
	return holdingFive(t, replica.Config{DisconnectedTimeout: func() time.Duration { return timeout }})
}

// holdingFive is a queue on b opened with cfg, and a consumer on a
// holding its first five messages through a consume stream.
func holdingFive(t *testing.T, cfg replica.Config) (cluster, *replica.Replica, *forward.Router, *testConsumer) {
	t.Helper()
	c := cluster{"a": newNode(t, "a"), "b": newNode(t, "b")}
	rep := c["b"].openReplicaWith("q1", cfg)
	r := c.router(t, "a", "q1", nil, 0)
	tc := &testConsumer{}
	if err := r.Consume(tc, queue.ConsumeOptions{Tag: "c", Prefetch: 10}); err != nil {
		t.Fatal(err)
	}
	var conf confirms
	publish(t, r, 0, 5, &conf)
	testwait.For(t, 10*time.Second, "five deliveries", func() bool { return tc.count() == 5 })
	return c, rep, r, tc
}

// A consume stream that breaks, its router unable to attach again, keeps
// what its consumer holds for the queue's consumer disconnected timeout
// (RabbitMQ 4.3's suspected-down consumer), and only then returns it to
// the queue; nothing more is handed to the consumer meanwhile.
func TestBrokenStreamKeepsDeliveriesForTheDisconnectedTimeout(t *testing.T) {
	t.Parallel() // it mostly waits out timeouts, on its own nodes
	const timeout = 2 * time.Second
	c, rep, r, _ := disconnectedSetup(t, timeout)
	c["b"].refuseConsume.Store(true)
	broke := time.Now()
	c["b"].breakStreams()
	testwait.For(t, 5*time.Second, "the consumer detached", func() bool { return rep.Stats().Consumers == 0 })
	var more confirms
	publish(t, r, 5, 3, &more)
	testwait.For(t, 5*time.Second, "three more confirmed", func() bool { ok, _ := more.counts(); return ok == 3 })
	if st := rep.Stats(); st.Unacked != 5 || st.Ready != 3 {
		t.Fatalf("within the timeout: %+v, want the five held and the three new ready", st)
	}
	testwait.For(t, 3*timeout, "the held deliveries returned", func() bool { return rep.Stats().Ready == 8 })
	if held := time.Since(broke); held < timeout {
		t.Fatalf("returned after %v, before the %v timeout", held, timeout)
	}
	if st := rep.Stats(); st.Unacked != 0 {
		t.Fatalf("after the timeout: %+v", st)
	}
	// Returned first, not counted as a failed delivery (RabbitMQ 4.3's
	// return on this timeout leaves the delivery-count as it was).
	d, _, ok, err := rep.Get(true)
	if err != nil || !ok || string(d.Message.Body) != "m0" || !d.Redelivered {
		t.Fatalf("first get after the timeout: %+v %v %v", d, ok, err)
	}
	if n, set := d.Message.Properties.Headers["x-delivery-count"]; set && n != int64(0) {
		t.Fatalf("returned with x-delivery-count %v", n)
	}
}

// A consumer whose stream broke and that attaches again within the
// timeout, under its ID, takes its deliveries over: its acknowledgements
// settle them, and nothing is handed out twice.
func TestConsumerBackWithinTheDisconnectedTimeoutKeepsItsDeliveries(t *testing.T) {
	c, rep, r, tc := disconnectedSetup(t, time.Minute)
	c["b"].refuseConsume.Store(true)
	c["b"].breakStreams()
	testwait.For(t, 5*time.Second, "the consumer detached", func() bool { return rep.Stats().Consumers == 0 })
	time.Sleep(500 * time.Millisecond) // a window in which the deliveries must stay held
	if st := rep.Stats(); st.Unacked != 5 || st.Ready != 0 {
		t.Fatalf("while cut off: %+v", st)
	}
	c["b"].refuseConsume.Store(false)
	testwait.For(t, 10*time.Second, "the consumer back", func() bool { return rep.Stats().Consumers == 1 })
	r.Settle(ids(tc.deliveries()))
	testwait.For(t, 10*time.Second, "the five settled", func() bool { st := rep.Stats(); return st.Unacked == 0 && st.Ready == 0 })
	var more confirms
	publish(t, r, 5, 1, &more)
	testwait.For(t, 10*time.Second, "the next delivery", func() bool { return tc.count() == 6 })
	for i, d := range tc.deliveries() {
		if d.Redelivered {
			t.Fatalf("delivery %d handed out again: %+v", i, d)
		}
	}
}

// Without a timeout, a broken stream's deliveries return at once (as
// before RabbitMQ 4.3, and as 0 configures it there).
func TestBrokenStreamWithoutDisconnectedTimeoutReturnsAtOnce(t *testing.T) {
	c, rep, _, _ := disconnectedSetup(t, 0)
	c["b"].refuseConsume.Store(true)
	c["b"].breakStreams()
	testwait.For(t, 5*time.Second, "the held deliveries returned", func() bool { st := rep.Stats(); return st.Ready == 5 && st.Unacked == 0 })
}

// A consumer whose node start is over (the node restarted since, or left)
// has lost its channel: what it holds returns as soon as its stream
// breaks, whatever the timeout.
func TestBrokenStreamOfAGoneNodeStartReturnsAtOnce(t *testing.T) {
	c, rep, _, _ := disconnectedSetup(t, time.Minute)
	c["b"].srv.SetStartGone(func(uint64) bool { return true })
	c["b"].refuseConsume.Store(true)
	c["b"].breakStreams()
	testwait.For(t, 5*time.Second, "the held deliveries returned", func() bool { st := rep.Stats(); return st.Ready == 5 && st.Unacked == 0 })
}

// sacSetup is a single-active-consumer queue on b with the given
// disconnected timeout, its active consumer on a (through a consume
// stream) holding the first five messages, and a second consumer attached
// on b itself, waiting for its turn.
func sacSetup(t *testing.T, timeout time.Duration) (cluster, *replica.Replica, *forward.Router, *testConsumer, *testConsumer) {
	t.Helper()
	c, rep, r, active := holdingFive(t, replica.Config{
		Arguments:           map[string]any{"x-single-active-consumer": true},
		DisconnectedTimeout: func() time.Duration { return timeout },
	})
	waiting := &testConsumer{}
	if err := rep.Consume(waiting, queue.ConsumeOptions{Tag: "waiting", Prefetch: 10}); err != nil {
		t.Fatal(err)
	}
	return c, rep, r, active, waiting
}

// A single active consumer whose stream breaks keeps its place for the
// disconnected timeout, as RabbitMQ 4.3 keeps a suspected-down active
// consumer: the next consumer takes over only when it has passed, and
// then gets the held messages first, in order, ahead of those published
// meanwhile.
func TestSingleActiveConsumerKeepsItsPlaceForTheDisconnectedTimeout(t *testing.T) {
	t.Parallel() // it mostly waits out timeouts, on its own nodes
	const timeout = 2 * time.Second
	c, _, r, _, waiting := sacSetup(t, timeout)
	c["b"].refuseConsume.Store(true)
	c["b"].breakStreams()
	var more confirms
	publish(t, r, 5, 3, &more)
	testwait.For(t, 5*time.Second, "three more confirmed", func() bool { ok, _ := more.counts(); return ok == 3 })
	time.Sleep(timeout / 2) // well inside the timeout, when the waiting consumer must get nothing
	if n := waiting.count(); n != 0 {
		t.Fatalf("the waiting consumer got %d messages within the timeout", n)
	}
	testwait.For(t, 5*timeout, "the waiting consumer to take over", func() bool { return waiting.count() == 8 })
	for i, d := range waiting.deliveries() {
		if want := fmt.Sprintf("m%d", i); string(d.Message.Body) != want {
			t.Fatalf("delivery %d: %s, want %s", i, d.Message.Body, want)
		}
	}
}

// A single active consumer back within the timeout is still the active
// one: it settles what it held and gets what was published meanwhile,
// handed to it only once it is back (suspended meanwhile, as RabbitMQ
// hands a suspected-down consumer nothing), so not redelivered; the
// waiting consumer gets nothing.
func TestSingleActiveConsumerBackWithinTheDisconnectedTimeout(t *testing.T) {
	c, rep, r, active, waiting := sacSetup(t, time.Minute)
	c["b"].refuseConsume.Store(true)
	c["b"].breakStreams()
	var more confirms
	publish(t, r, 5, 3, &more)
	testwait.For(t, 5*time.Second, "three more confirmed", func() bool { ok, _ := more.counts(); return ok == 3 })
	time.Sleep(500 * time.Millisecond) // away a while, as a consumer whose link broke is
	c["b"].refuseConsume.Store(false)
	testwait.For(t, 10*time.Second, "the three new ones to the consumer back", func() bool { return active.count() == 8 })
	r.Settle(ids(active.deliveries()))
	testwait.For(t, 10*time.Second, "all settled", func() bool { st := rep.Stats(); return st.Ready == 0 && st.Unacked == 0 })
	for i, d := range active.deliveries() {
		if string(d.Message.Body) != fmt.Sprintf("m%d", i) || d.Redelivered {
			t.Fatalf("delivery %d to the consumer back: %s, redelivered %v", i, d.Message.Body, d.Redelivered)
		}
	}
	if n := waiting.count(); n != 0 {
		t.Fatalf("the waiting consumer got %d messages", n)
	}
}

// A consumer whose channel closes (Release) while its router is still
// trying to attach it to the leader (its stream broke, the link is back a
// moment later) is declared down only after those tries end: an attach
// that got through after the release would take the queue's messages for
// a consumer nothing declares down any more (a chaos run stranded 32 so,
// unacknowledged until the node stopped). The five it held return, and
// nothing is handed out again.
func TestReleaseWhileAttachingReturnsWhatTheConsumerHeld(t *testing.T) {
	t.Parallel() // it mostly waits out timeouts, on its own nodes
	c, rep, r, tc := disconnectedSetup(t, time.Minute)
	c["b"].refuseConsume.Store(true)
	c["b"].breakStreams()
	testwait.For(t, 5*time.Second, "the consumer detached", func() bool { return rep.Stats().Consumers == 0 })
	r.Release(tc)
	// Past the release's grace: before the fix the release had gone in by
	// now, and the attach below came after it.
	time.Sleep(1500 * time.Millisecond)
	c["b"].refuseConsume.Store(false)
	testwait.For(t, 10*time.Second, "the five returned", func() bool { st := rep.Stats(); return st.Ready == 5 && st.Unacked == 0 })
	time.Sleep(time.Second) // an attach still under way would take them now
	if st := rep.Stats(); st.Ready != 5 || st.Unacked != 0 || st.Consumers != 0 {
		t.Fatalf("a second after the five returned: %+v, want five ready, none held, no consumer", st)
	}
	if n := tc.count(); n != 5 {
		t.Fatalf("the released consumer got %d deliveries, want the first five only", n)
	}
}
