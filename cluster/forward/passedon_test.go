package forward_test

import (
	"context"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
	"github.com/warrenmq/warren/raftq/testwait"
)

// A member that handed its leadership off passes the acks it is given
// meanwhile to the new leader through its node's router (SettleHeld, or
// SettleDeliveriesAtLeader for deliveries it does not know), and a node
// that stops gracefully closes that router right after the hand-off.
// Those acks were accepted from a client, which will not send them again:
// they must reach the leader however the close falls. Here the leader refuses
// every Settle call until well after the router began to close; the close
// waits (within its deadline), and the messages end settled instead of
// checked out to a consumer that believes it acked them.
func TestPassedOnSettlementsOutliveTheRoutersClose(t *testing.T) {
	c, rep := twoNodes(t)
	r := forward.NewRouter(forward.RouterConfig{
		QueueID: "q1", Name: "/q1", Members: []string{"b"},
		Addr: c.addr, Pool: c["a"].pool, Log: testLog,
	})
	var conf confirms
	publish(t, r, 0, 3, &conf)
	testwait.For(t, 10*time.Second, "confirms", func() bool { ok, _ := conf.counts(); return ok == 3 })
	// The consumer the acks name, attached at the leader.
	consumer := replica.ConsumerIDFor(replica.BootOf("a", "1"))
	tc := &testConsumer{}
	if err := rep.Consume(tc, queue.ConsumeOptions{Tag: "c1", Prefetch: 10, ID: consumer}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "deliveries", func() bool { return tc.count() == 3 })

	c["b"].refuseSettles.Store(true)
	// As a member that has not applied their handing-out passes acks on
	// (SettleHeld, a former leader's, goes the same way).
	r.SettleDeliveriesAtLeader(raftq.OpSettle, 0, ids(tc.deliveries()))
	healed := time.AfterFunc(time.Second, func() { c["b"].refuseSettles.Store(false) })
	defer healed.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closing := time.Now()
	r.CloseWithin(ctx)
	if took := time.Since(closing); took < 500*time.Millisecond {
		t.Errorf("the close returned after %v, before the leader could take the acks", took)
	}
	testwait.For(t, 5*time.Second, "the acks applied at the leader", func() bool {
		st := rep.Stats()
		return st.Unacked == 0 && st.Ready == 0
	})
}

// A router closed with settlements no leader takes gives up on them at its
// deadline, and the close returns then.
func TestRouterCloseGivesUpOnSettlementsAtItsDeadline(t *testing.T) {
	c, rep := twoNodes(t)
	r := forward.NewRouter(forward.RouterConfig{
		QueueID: "q1", Name: "/q1", Members: []string{"b"},
		Addr: c.addr, Pool: c["a"].pool, Log: testLog,
	})
	c["b"].refuseSettles.Store(true)
	r.SettleHeld([]replica.HeldSettlement{{Op: raftq.OpSettle, Consumer: 1, Messages: []uint64{1}}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	closing := time.Now()
	r.CloseWithin(ctx)
	if took := time.Since(closing); took > 3*time.Second {
		t.Fatalf("the close took %v, past its deadline", took)
	}
	if st := rep.Stats(); st != (queue.Stats{}) {
		t.Fatalf("stats %+v", st)
	}
}
