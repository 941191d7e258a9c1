package replica

import (
	"errors"
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
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
	// way (a spin, since the attach takes a sync on two members), unless
	// a lost leadership ended it first.
	var attachErr error
	ended := false
	for !ended {
		lead.consumers.mu.Lock()
		_, attaching := lead.consumers.byID[id]
		lead.consumers.mu.Unlock()
		if attaching {
			break
		}
		select {
		case attachErr = <-attached:
			ended = true
		default:
		}
	}
	release([]OwnedSettlement{{Owner: id}}, g, lead)
	if !ended {
		attachErr = <-attached
	}
	if attachErr != nil && !errors.Is(attachErr, ErrNotLeader) {
		t.Fatalf("attach: %v", attachErr)
	}
	testwait.For(t, 5*time.Second, "the release applied after the attach: the consumer gone and 3 messages ready", func() bool {
		_, lead := g.leader()
		lead.fsm.mu.Lock()
		defer lead.fsm.mu.Unlock()
		stats := lead.fsm.m.Stats()
		return !lead.fsm.m.Known(id) && stats.Ready == 3 && stats.Unacked == 0
	})
}

// release has the group's leader take list, first lead, as a node's
// router sends a release again until a leader takes it: on a busy machine
// the leadership may move meanwhile.
func release(list []OwnedSettlement, g *group, lead *Replica) {
	g.t.Helper()
	for {
		err := lead.SettleOwned(list)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotLeader) {
			g.t.Fatalf("release: %v", err)
		}
		_, lead = g.leader()
	}
}

// TestReleaseOfAForgottenConsumerNeedsNoBarrier: the usual release, of a
// consumer cancelled holding nothing (which the machine forgot), finds no
// attach or get under way and appends nothing to the log.
func TestReleaseOfAForgottenConsumerNeedsNoBarrier(t *testing.T) {
	g := newGroup(t, perQueueFiles)
	_, lead := g.leader()
	publish(t, lead, 0, 1) // the leader has taken over: nothing else to append
	list := []OwnedSettlement{{Owner: raftq.ConsumerID(ConsumerIDFor("elsewhere/1"))}}
	for {
		_, lead = g.leader()
		before := lead.raft.LastIndex()
		err := lead.SettleOwned(list)
		if errors.Is(err, ErrNotLeader) {
			continue // the leadership moved under a busy machine: ask the next
		}
		if err != nil {
			t.Fatal(err)
		}
		if after := lead.raft.LastIndex(); after != before {
			t.Fatalf("the log grew from %d to %d", before, after)
		}
		return
	}
}
