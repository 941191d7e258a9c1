package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/queue"
)

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
