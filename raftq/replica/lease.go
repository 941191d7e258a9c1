package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// onLeading runs once the replica leads and has applied its log: it
// resumes what the machine says is unfinished, the at-least-once dead
// letters and an x-expires deletion requested before a restart, and
// returns the messages of consumers that were attached through an earlier
// leader.
func (w *watcher) onLeading() {
	w.r.storage.recent.start()
	w.r.dl.start()
	w.r.dl.resendPendingSoon()
	w.r.fsm.mu.Lock()
	deleting := w.r.fsm.m.DeleteRequested()
	w.r.fsm.mu.Unlock()
	if deleting {
		w.r.expire()
	}
	w.r.consumers.reap()
	w.r.upgrade.run()
}

// onFollowing runs when the replica stops leading. Publishes waiting for
// their commit are answered ErrNotLeader (forwarders send them to the new
// leader, which stores each once), and every consumer attached here is
// dropped: movable ones attach again to the new leader, under the same
// IDs, keeping the messages they hold (former.go). The settlements in
// hand go to the new leader.
func (w *watcher) onFollowing() {
	w.r.consumers.orphansDetached.Store(false)
	w.r.upgrade.upgrading.Store(0)
	w.r.upgrade.upgradeHeld.Store(false)
	w.r.storage.recent.clear() // only a leader delivers
	w.r.pub.failPending(ErrNotLeader)
	w.r.consumers.mu.Lock()
	consumers := w.r.consumers.byID
	w.r.consumers.byID = make(map[raftq.ConsumerID]*consumerRef)
	w.r.consumers.byHandle = make(map[queue.Consumer]raftq.ConsumerID)
	left := w.r.consumers.toSettle
	w.r.consumers.toSettle = make(map[raftq.ConsumerID][]uint64)
	w.r.consumers.mu.Unlock()
	w.r.settler.atLeader(acksOf(left)) // they name consumer and message already
	for _, ref := range consumers {
		if m, ok := ref.c.(queue.Movable); ok {
			go m.LeaderLost()
		} else {
			go ref.c.Gone()
		}
	}
}

// HandOff gives the group's leadership to another voter whose node
// canTake accepts (nil: any), before this node stops or while it drains.
// The first try lets raft pick the most up-to-date voter when every other
// one may take it; later tries name them in turn. A transfer that fails
// is tried again until ctx ends: one in progress already (an operator's,
// or the rebalancer's, which may move the leadership back here) answers
// at once, and one whose target does not win, or cannot be caught up,
// answers after the election timeout: HandOff stops waiting for it when
// ctx ends. Given up, the node would stop as the leader, and the others
// would elect only once gossip or their heartbeat timeout says it is
// gone. ErrNoTarget: no voter to hand to.
func (r *Replica) HandOff(ctx context.Context, canTake func(node string) bool) error {
	for try := 0; ; try++ {
		if !r.isLeader() {
			return nil
		}
		targets, all := r.handOffTargets(canTake)
		if len(targets) == 0 {
			return ErrNoTarget
		}
		r.settler.beforeTransfer()
		var f raft.Future
		if try == 0 && all {
			f = r.raft.LeadershipTransfer()
		} else {
			to := targets[try%len(targets)]
			f = r.raft.LeadershipTransferToServer(to.ID, to.Address)
		}
		// raft answers a transfer whose target it cannot catch up, or
		// which does not win, only after its election timeout (30 s for
		// queue groups): a stopping node waits at most its deadline.
		err := r.waitUntil(ctx, f)
		if err == nil || !r.isLeader() {
			return nil
		}
		if errors.Is(err, raft.ErrRaftShutdown) {
			return errorFor(err)
		}
		if errors.Is(err, ctx.Err()) { // waitUntil gave up
			return fmt.Errorf("hand off the leadership: no transfer done in time: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hand off the leadership: %w (gave up: %w)", err, ctx.Err())
		case <-r.done:
			return queue.ErrDeleted
		case <-time.After(handOffRetry):
			r.log.Debug("handing off the leadership again", "err", err)
		}
	}
}

// handOffRetry is how long HandOff waits before it tries again.
const handOffRetry = 100 * time.Millisecond

// ErrNoTarget: the group has no other voter that may take the leadership.
var ErrNoTarget = errors.New("replica: no other voter to take the leadership")

// handOffTargets are the group's voters other than this member that
// canTake accepts, by name; all reports whether that is every other one.
func (c *core) handOffTargets(canTake func(node string) bool) (targets []raft.Server, all bool) {
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	all = true
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter || string(s.ID) == c.cfg.NodeID {
			continue
		}
		if canTake != nil && !canTake(string(s.ID)) {
			all = false
			continue
		}
		targets = append(targets, s)
	}
	slices.SortFunc(targets, func(a, b raft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return targets, all
}
