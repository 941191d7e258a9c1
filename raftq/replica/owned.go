package replica

import (
	"errors"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq"
)

// Two kinds of holder are settled by their ID rather than by delivery,
// with settlements their node sends again until a leader has committed
// them (SettleOwned), because nothing else would return what they hold:
//
//   - A basic.get forwarded from another node is checked out to a getter
//     ID that node chose for that one get (ConsumerIDFor, so NodeGone
//     finds it), not to the leader's own getter. Its node acknowledges or
//     returns the message by that ID, and returns whatever the getter
//     holds when the get's answer is lost (the link to the leader broke
//     after the get was proposed). With the leader's getter, a message
//     whose answer was lost stayed checked out to a live leader,
//     delivered to nobody, until the leadership moved.
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
	if !r.isLeader() || !r.orphansDetached.Load() {
		return ErrNotLeader
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
