package forward_test

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// disconnectedSetup is a queue on b whose consumer disconnected timeout
// is timeout, and a consumer on a holding five deliveries through a
// consume stream.
func disconnectedSetup(t *testing.T, timeout time.Duration) (cluster, *replica.Replica, *forward.Router, *testConsumer) {
	t.Helper()
	c := cluster{"a": newNode(t, "a"), "b": newNode(t, "b")}
	rep := c["b"].openReplicaWith("q1", replica.Config{DisconnectedTimeout: func() time.Duration { return timeout }})
	r := c.router(t, "a", "q1", nil, 0)
	tc := &testConsumer{}
	if err := r.Consume(tc, queue.ConsumeOptions{Tag: "c", Prefetch: 10}); err != nil {
		t.Fatal(err)
	}
	var conf confirms
	publish(t, r, 0, 5, &conf)
	waitFor(t, 10*time.Second, "five deliveries", func() bool { return tc.count() == 5 })
	return c, rep, r, tc
}

// A consume stream that breaks, its router unable to attach again, keeps
// what its consumer holds for the queue's consumer disconnected timeout
// (RabbitMQ 4.3's suspected-down consumer), and only then returns it to
// the queue; nothing more is handed to the consumer meanwhile.
func TestBrokenStreamKeepsDeliveriesForTheDisconnectedTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	c, rep, r, _ := disconnectedSetup(t, timeout)
	c["b"].refuseConsume.Store(true)
	broke := time.Now()
	c["b"].breakStreams()
	waitFor(t, 5*time.Second, "the consumer detached", func() bool { return rep.Stats().Consumers == 0 })
	var more confirms
	publish(t, r, 5, 3, &more)
	waitFor(t, 5*time.Second, "three more confirmed", func() bool { ok, _ := more.counts(); return ok == 3 })
	if st := rep.Stats(); st.Unacked != 5 || st.Ready != 3 {
		t.Fatalf("within the timeout: %+v, want the five held and the three new ready", st)
	}
	waitFor(t, 3*timeout, "the held deliveries returned", func() bool { return rep.Stats().Ready == 8 })
	if held := time.Since(broke); held < timeout {
		t.Fatalf("returned after %v, before the %v timeout", held, timeout)
	}
	if st := rep.Stats(); st.Unacked != 0 {
		t.Fatalf("after the timeout: %+v", st)
	}
}

// A consumer whose stream broke and that attaches again within the
// timeout, under its ID, takes its deliveries over: its acknowledgements
// settle them, and nothing is handed out twice.
func TestConsumerBackWithinTheDisconnectedTimeoutKeepsItsDeliveries(t *testing.T) {
	c, rep, r, tc := disconnectedSetup(t, time.Minute)
	c["b"].refuseConsume.Store(true)
	c["b"].breakStreams()
	waitFor(t, 5*time.Second, "the consumer detached", func() bool { return rep.Stats().Consumers == 0 })
	time.Sleep(500 * time.Millisecond)
	if st := rep.Stats(); st.Unacked != 5 || st.Ready != 0 {
		t.Fatalf("while cut off: %+v", st)
	}
	c["b"].refuseConsume.Store(false)
	waitFor(t, 10*time.Second, "the consumer back", func() bool { return rep.Stats().Consumers == 1 })
	r.Settle(ids(tc.deliveries()))
	waitFor(t, 10*time.Second, "the five settled", func() bool { st := rep.Stats(); return st.Unacked == 0 && st.Ready == 0 })
	var more confirms
	publish(t, r, 5, 1, &more)
	waitFor(t, 10*time.Second, "the next delivery", func() bool { return tc.count() == 6 })
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
	waitFor(t, 5*time.Second, "the held deliveries returned", func() bool { st := rep.Stats(); return st.Ready == 5 && st.Unacked == 0 })
}

// A consumer whose node start is over (the node restarted since, or left)
// has lost its channel: what it holds returns as soon as its stream
// breaks, whatever the timeout.
func TestBrokenStreamOfAGoneNodeStartReturnsAtOnce(t *testing.T) {
	c, rep, _, _ := disconnectedSetup(t, time.Minute)
	c["b"].srv.SetStartGone(func(uint64) bool { return true })
	c["b"].refuseConsume.Store(true)
	c["b"].breakStreams()
	waitFor(t, 5*time.Second, "the held deliveries returned", func() bool { st := rep.Stats(); return st.Ready == 5 && st.Unacked == 0 })
}
