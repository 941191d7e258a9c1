package replica

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// Two kinds of holder are settled by their ID rather than by delivery,
// with settlements their node sends again until a leader has committed
// them (SettleOwned), because nothing else would return what they hold:
//
//   - A basic.get is checked out to a getter ID the asking node chose for
//     that one get (ConsumerIDFor, so NodeGone finds it), not to the
//     leader's own getter, whether it was forwarded from another node or
//     asked of the leader on its own node (GetAs). Its node acknowledges
//     or returns the message by that ID, and returns whatever the getter
//     holds when the get's answer is lost: the link to the leader broke
//     after the get was proposed, or the leader lost its leadership
//     before applying it, and the get was asked again of the next one.
//     With the leader's getter, shared by all its node's channels, such
//     a message stayed checked out, delivered to nobody, until a leader
//     gave up on it (the disconnected timeout).
//   - A consumer whose channel closed (queue.Releaser) is declared down
//     once its acknowledgements had time to arrive: it may hold messages
//     its channel no longer knows of, whose acknowledgement went to a
//     leader that lost it, and a cancelled consumer keeps what it holds.
//
// RabbitMQ checks a message out to the asking channel's process, whose
// end returns everything it holds (rabbit_fifo's down handling); the
// getter ID stands for the channel, one message at a time.

// OwnedSettlement settles what Owner holds: Delivery's message with Op
// (raftq.OpSettle, OpReturn or OpDiscard, with Cause), or, when Delivery
// is 0, everything it holds, returned as a closed channel's would be.
type OwnedSettlement struct {
	Op       raftq.Op
	Cause    queue.ReturnCause
	Owner    raftq.ConsumerID
	Delivery uint64
}

// SettleOwned commits list and returns once it is in the log: ErrNotLeader
// (or the log's error) tells the asking node to send it again, to the
// leader. Each settlement is idempotent: what the owner no longer holds
// (settled, timed out, returned by a leader change) is left alone.
func (r *Replica) SettleOwned(list []OwnedSettlement) error {
	if r.stopped.Load() {
		return r.stoppedErr()
	}
	// Not before the orphans' detach is in the log, as SettleHeld.
	if !r.isLeader() || !r.consumers.orphansDetached.Load() {
		return ErrNotLeader
	}
	// A release can reach this leader before the attach or get it is
	// to undo is applied, proposed here before its node gave up on it:
	// checked against the machine then, it would find nothing to do, and
	// the attach would take messages afterwards. So everything appended
	// so far is applied first. Under attachMu, which Consume and GetAs
	// hold from making their owner pending to proposing, so that the
	// barrier follows the proposal it waits for. (What earlier leaders
	// proposed is applied already, orphansDetached says; a proposal in no
	// leader's log can never commit.)
	r.consumers.attachMu.Lock()
	var barrier raft.Future
	if r.consumers.releasesPending(list) {
		barrier = r.raft.Barrier(ownedBarrierWait)
	}
	r.consumers.attachMu.Unlock()
	if barrier != nil {
		ctx, cancel := context.WithTimeout(context.Background(), ownedBarrierWait)
		err := r.waitUntil(ctx, barrier)
		cancel()
		if err != nil {
			return errorFor(err) // sent again
		}
	}
	var cmds []*raftq.Command
	r.fsm.mu.Lock()
	for _, s := range list {
		if s.Delivery == 0 {
			if r.fsm.m.Known(s.Owner) {
				cmds = append(cmds, &raftq.Command{Op: raftq.OpConsumerDown, Consumer: s.Owner})
			}
			continue
		}
		holder, msg, ok := r.fsm.m.HeldBy(s.Delivery)
		if !ok || holder != s.Owner {
			continue
		}
		cmds = append(cmds, &raftq.Command{Op: s.Op, Consumer: s.Owner, IDs: []uint64{msg}, Cause: raftq.ReturnCause(s.Cause)})
	}
	r.fsm.mu.Unlock()
	futures := make([]raft.ApplyFuture, 0, len(cmds))
	for _, c := range cmds {
		futures = append(futures, r.propose(c))
	}
	var errs []error
	for _, f := range futures {
		if err := r.wait(f); err != nil {
			if errors.Is(err, raft.ErrRaftShutdown) {
				err = r.stoppedErr()
			}
			errs = append(errs, errorFor(err))
		}
	}
	return errors.Join(errs...)
}

// ownedBarrierWait bounds SettleOwned's wait for the entries before a
// release of an unknown owner; its node sends the release again after it.
const ownedBarrierWait = 10 * time.Second

// releasesPending says whether list releases an owner (Delivery 0) that
// the machine does not know while an attach or a get this member proposed
// may still make it known: the consumer's attach is under way here
// (Consume registers it first), or a get with its own getter is. A consumer
// that was cancelled holding nothing is forgotten by the machine, so most
// releases of closed channels find their owner unknown, and pay no barrier.
func (t *consumerTable) releasesPending(list []OwnedSettlement) bool {
	var unknown []raftq.ConsumerID
	t.r.fsm.mu.Lock()
	for _, s := range list {
		if s.Delivery == 0 && !t.r.fsm.m.Known(s.Owner) {
			unknown = append(unknown, s.Owner)
		}
	}
	t.r.fsm.mu.Unlock()
	if len(unknown) == 0 {
		return false
	}
	if t.foreignGets.Load() > 0 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range unknown {
		if _, attaching := t.byID[id]; attaching {
			return true
		}
	}
	return false
}
