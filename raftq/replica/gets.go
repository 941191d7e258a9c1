package replica

import (
	"errors"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq"
)

// A basic.get forwarded from another node is checked out to a getter ID
// that node chose for that one get (ConsumerIDFor, so NodeGone finds it),
// not to the leader's own getter. Its node settles the message by that ID
// (SettleGets) and sends the settlement again until a leader has committed
// it; when the get's answer is lost (the link to the leader broke after
// the get was proposed) its node returns whatever the getter holds. With
// the leader's getter, a message whose answer was lost stayed checked out
// to a live leader, delivered to nobody, until the leadership moved.
//
// RabbitMQ checks a basic.get message out to the asking channel's
// process, whose end returns it (rabbit_fifo's down handling); the getter
// ID stands for the channel, one message at a time.

// GetSettlement settles what Getter holds: Delivery's message with Op
// (raftq.OpSettle, OpReturn or OpDiscard, with Cause), or, when Delivery
// is 0, everything it holds, returned as a closed channel's would be.
type GetSettlement struct {
	Op       raftq.Op
	Cause    queue.ReturnCause
	Getter   raftq.ConsumerID
	Delivery uint64
}

// SettleGets commits list and returns once it is in the log: ErrNotLeader
// (or the log's error) tells the asking node to send it again, to the
// leader. Each settlement is idempotent: what the getter no longer holds
// (settled, timed out, returned by a leader change) is left alone.
func (r *Replica) SettleGets(list []GetSettlement) error {
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
		if !r.fsm.m.Getter(s.Getter) {
			continue // holds nothing (or never held: the get was not committed)
		}
		if s.Delivery == 0 {
			cmds = append(cmds, &raftq.Command{Op: raftq.OpConsumerDown, Consumer: s.Getter})
			continue
		}
		holder, msg, ok := r.fsm.m.HeldBy(s.Delivery)
		if !ok || holder != s.Getter {
			continue
		}
		cmds = append(cmds, &raftq.Command{Op: s.Op, Consumer: s.Getter, IDs: []uint64{msg}, Cause: raftq.ReturnCause(s.Cause)})
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
