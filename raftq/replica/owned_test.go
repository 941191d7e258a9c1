package replica

import (
	"testing"

	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq"
)

// TestReleaseWaitsForAnAttachUnderWay: a consumer released (its node gave
// up attaching it, or its channel closed) while its attach is proposed at
// the leader but not yet applied is down once that attach is applied,
// and what the attach handed it is back in the queue. Checked against the
// machine as the release found it, the release did nothing and the attach
// then took the messages for a consumer no node knew: a chaos run
// stranded 96 messages that way.
func TestReleaseWaitsForAnAttachUnderWay(t *testing.T) {
	g := newGroup(t, perQueueFiles)
	_, lead := g.leader()
	publish(t, lead, 0, 3)
	id := raftq.ConsumerID(ConsumerIDFor("elsewhere/1"))
	attached := make(chan error, 1)
	go func() {
		attached <- lead.Consume(&fakeConsumer{}, queue.ConsumeOptions{ID: uint64(id), Prefetch: 10})
	}()
	// Registered here before it is proposed: seen, its attach is under
	// way (a spin, since the attach takes a sync on two members).
	for {
		lead.mu.Lock()
		_, attaching := lead.consumers[id]
		lead.mu.Unlock()
		if attaching {
			break
		}
	}
	if err := lead.SettleOwned([]OwnedSettlement{{Owner: id}}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := <-attached; err != nil {
		t.Fatalf("attach: %v", err)
	}
	lead.fsm.mu.Lock()
	known, stats := lead.fsm.m.Known(id), lead.fsm.m.Stats()
	lead.fsm.mu.Unlock()
	if known || stats.Ready != 3 || stats.Unacked != 0 {
		t.Fatalf("after the release: consumer known %v, %d ready, %d unacked; want it gone and 3 ready", known, stats.Ready, stats.Unacked)
	}
}

// TestReleaseOfAForgottenConsumerNeedsNoBarrier: the usual release, of a
// consumer cancelled holding nothing (which the machine forgot), finds no
// attach or get under way and appends nothing to the log.
func TestReleaseOfAForgottenConsumerNeedsNoBarrier(t *testing.T) {
	g := newGroup(t, perQueueFiles)
	_, lead := g.leader()
	before := lead.raft.LastIndex()
	if err := lead.SettleOwned([]OwnedSettlement{{Owner: raftq.ConsumerID(ConsumerIDFor("elsewhere/1"))}}); err != nil {
		t.Fatal(err)
	}
	if after := lead.raft.LastIndex(); after != before {
		t.Fatalf("the log grew from %d to %d", before, after)
	}
}
