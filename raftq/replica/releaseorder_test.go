package replica

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestReleaseFollowsTheAcksInHand: a former leader's acks, passed on,
// join the leader's batch (SettleHeld) and may wait there for company,
// while the release of the same consumer (its channel closed) is
// proposed at once. The acks go into the log first: released first, the
// acked messages would return to the queue and be delivered again.
func TestReleaseFollowsTheAcksInHand(t *testing.T) {
	g := newGroup(t, perQueueFiles)
	_, lead := g.leader()
	publish(t, lead, 0, 3)
	id := raftq.ConsumerID(ConsumerIDFor("elsewhere/1"))
	c := &fakeConsumer{}
	// No prefetch: the acks of three messages are not due at once.
	if err := lead.Consume(c, queue.ConsumeOptions{ID: uint64(id)}); err != nil {
		t.Fatal(err)
	}
	var deliveries []uint64
	testwait.For(t, 5*time.Second, "3 deliveries", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		deliveries = deliveries[:0]
		for _, d := range c.got {
			deliveries = append(deliveries, d.ID)
		}
		return len(deliveries) == 3
	})
	_, groups, _ := lead.byHolder(deliveries)
	if len(groups[id]) != 3 {
		t.Fatalf("held by the consumer: %v", groups)
	}
	if err := lead.SettleHeld([]HeldSettlement{{Op: raftq.OpSettle, Consumer: id, Messages: groups[id]}}); err != nil {
		t.Fatal(err)
	}
	release([]OwnedSettlement{{Owner: id}}, g, lead)
	testwait.For(t, 5*time.Second, "the consumer down", func() bool {
		_, lead := g.leader()
		lead.fsm.mu.Lock()
		defer lead.fsm.mu.Unlock()
		return !lead.fsm.m.Known(id)
	})
	_, lead = g.leader()
	lead.fsm.mu.Lock()
	stats := lead.fsm.m.Stats()
	lead.fsm.mu.Unlock()
	if stats.Ready != 0 || stats.Unacked != 0 {
		t.Fatalf("acked messages back in the queue: %+v", stats)
	}
}
