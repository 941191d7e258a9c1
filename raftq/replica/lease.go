package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq"
)

// Touch renews the queue's x-expires lease: the broker calls it when the
// queue is redeclared (the TTL guide: redeclaring renews the lease). It
// returns once the renewal is committed.
func (r *Replica) Touch() error {
	return errorFor(r.wait(r.propose(&raftq.Command{Op: raftq.OpTouch})))
}

// onLeading runs once the replica leads and has applied its log: it
// resumes what the machine says is unfinished, the at-least-once dead
// letters and an x-expires deletion requested before a restart, and
// returns the messages of consumers that were attached through an earlier
// leader.
func (r *Replica) onLeading() {
	r.recent.start()
	r.dlOnce.Do(r.dl.start)
	r.dl.resendPendingSoon()
	r.fsm.mu.Lock()
	deleting := r.fsm.m.DeleteRequested()
	r.fsm.mu.Unlock()
	if deleting && r.cfg.OnExpired != nil {
		go r.cfg.OnExpired()
	}
	r.reapConsumers()
	r.UpgradeMachine()
}

// onFollowing runs when the replica stops leading. Publishes waiting for
// their commit are answered ErrNotLeader (forwarders send them to the new
// leader, which stores each once), and every consumer attached here is
// dropped: movable ones attach again to the new leader, under the same
// IDs, keeping the messages they hold (former.go). The settlements in
// hand go to the new leader.
func (r *Replica) onFollowing() {
	r.orphansDetached.Store(false)
	r.upgrading.Store(0)
	r.recent.clear() // only a leader delivers
	r.failPending(ErrNotLeader)
	r.mu.Lock()
	consumers := r.consumers
	r.consumers = make(map[raftq.ConsumerID]*consumerRef)
	r.byHandle = make(map[queue.Consumer]raftq.ConsumerID)
	left := r.toSettle
	r.toSettle = make(map[raftq.ConsumerID][]uint64)
	r.mu.Unlock()
	r.settleAtLeader(acksOf(left)) // they name consumer and message already
	for _, ref := range consumers {
		if m, ok := ref.c.(queue.Movable); ok {
			go m.LeaderLost()
		} else {
			go ref.c.Gone()
		}
	}
}

// queueConfig is the configuration the queue's machine runs with.
func (r *Replica) queueConfig() raftq.Config {
	r.fsm.mu.Lock()
	defer r.fsm.mu.Unlock()
	return r.fsm.m.Config()
}

// HandOff gives the group's leadership to another member (raft picks the
// most up-to-date one), before this node stops or while it drains. A
// transfer that fails is tried again until ctx ends: one in progress
// already (an operator's, or the rebalancer's, which may move the
// leadership back here) answers at once, and one whose target does not
// win in time answers after the election timeout. Given up, the node
// would stop as the leader, and the others would elect only once gossip
// or their heartbeat timeout says it is gone. ErrAlone: no other voter
// to hand to.
func (r *Replica) HandOff(ctx context.Context) error {
	for {
		if !r.isLeader() {
			return nil
		}
		if !r.hasOtherVoter() {
			return ErrAlone
		}
		r.settleBeforeTransfer()
		err := r.wait(r.raft.LeadershipTransfer())
		if err == nil || !r.isLeader() {
			return nil
		}
		if errors.Is(err, raft.ErrRaftShutdown) {
			return errorFor(err)
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

// ErrAlone: the group has no other voter to take the leadership.
var ErrAlone = errors.New("replica: no other voter to take the leadership")

// hasOtherVoter reports whether the group's latest configuration has a
// voter besides this member.
func (r *Replica) hasOtherVoter() bool {
	servers, err := r.Servers()
	if err != nil {
		return false
	}
	for id, voter := range servers {
		if voter && id != r.cfg.NodeID {
			return true
		}
	}
	return false
}
