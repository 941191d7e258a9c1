package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/testwait"
)

// TestHandOffOutlastsATransferInProgress: a hand-off that finds another
// transfer under way (an operator's or the rebalancer's), here one to a
// member that is gone and cannot win, tries again once that one has
// failed, and moves the leadership to the live follower. Giving up at
// the first answer left a stopping node leading, and its queue without a
// leader until the others' timeouts.
func TestHandOffOutlastsATransferInProgress(t *testing.T) {
	g := newGroup(t, perQueueFiles)
	leadName, lead := g.leader()
	var gone, live string
	for _, n := range g.names {
		if n != leadName {
			if gone == "" {
				gone = n
			} else {
				live = n
			}
		}
	}
	g.stop(gone)
	publish(t, lead, 0, 5) // the gone member is behind: it cannot be caught up
	transferred := make(chan error, 1)
	go func() { transferred <- lead.TransferLeadership(gone, gone) }()
	time.Sleep(50 * time.Millisecond) // well inside its election timeout (400 ms)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lead.HandOff(ctx, nil); err != nil {
		t.Fatalf("hand off: %v", err)
	}
	if err := <-transferred; err == nil {
		t.Fatal("the transfer to the gone member succeeded; the test needs it to fail")
	}
	testwait.For(t, 5*time.Second, "the live follower to lead", func() bool {
		r := g.members[live]
		return r.IsLeader()
	})
}

// TestHandOffToNodesThatCanTake: a voter whose node cannot take the
// leadership (gone, as gossip says) is not asked; with none left to ask,
// HandOff says so at once instead of trying until its deadline.
func TestHandOffToNodesThatCanTake(t *testing.T) {
	g := newGroup(t, perQueueFiles)
	leadName, lead := g.leader()
	var others []string
	for _, n := range g.names {
		if n != leadName {
			others = append(others, n)
		}
	}
	gone, live := others[0], others[1]
	g.stop(gone)
	publish(t, lead, 0, 5)
	if err := lead.HandOff(context.Background(), func(string) bool { return false }); !errors.Is(err, ErrNoTarget) {
		t.Fatalf("hand off with no node to take it: %v, want ErrNoTarget", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lead.HandOff(ctx, func(n string) bool { return n != gone }); err != nil {
		t.Fatalf("hand off: %v", err)
	}
	testwait.For(t, 5*time.Second, "the live follower to lead", func() bool { return g.members[live].IsLeader() })
}

// TestHandOffAlone: a group of one has nobody to hand to.
func TestHandOffAlone(t *testing.T) {
	r := openTest(t, nil, t.TempDir(), nil)
	defer r.Close()
	testwait.For(t, 5*time.Second, "a leader", r.IsLeader)
	if err := r.HandOff(context.Background(), nil); !errors.Is(err, ErrNoTarget) {
		t.Fatalf("hand off alone: %v, want ErrNoTarget", err)
	}
}

// TestHandOffGivesUpAtItsDeadline: raft answers a transfer to a member
// it cannot catch up only after its election timeout, 30 s for queue
// groups. A hand-off waits at most until its context ends (a stopping
// node's is 5 s), not that out: a chaos run saw a stopping node hold its
// leadership 30 s, its queue confirming nothing, while its transfer
// waited out raft's timeout.
func TestHandOffGivesUpAtItsDeadline(t *testing.T) {
	g := newGroupWith(t, perQueueFiles, func(_ string, cfg *Config) {
		cfg.ElectionTimeout = 30 * time.Second // a transfer's limit too
	})
	leadName, lead := g.leader()
	var target string
	for _, n := range g.names {
		if n != leadName {
			target = n
			break
		}
	}
	// The leader's requests no longer reach the target, which falls
	// behind and cannot be caught up for the transfer.
	g.trans[leadName].Disconnect(raft.ServerAddress(target))
	publish(t, lead, 0, 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := lead.HandOff(ctx, func(n string) bool { return n == target })
	took := time.Since(start)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hand off to a member that cannot catch up: %v, want its deadline exceeded", err)
	}
	if took > 5*time.Second {
		t.Fatalf("hand off with a 1 s deadline returned after %v", took.Round(time.Millisecond))
	}
	if !lead.IsLeader() {
		t.Fatal("the leader stepped down, so the test shows nothing")
	}
}
