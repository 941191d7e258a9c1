package replica

import (
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq"
)

// A delivery's ID means something only to the member that handed it out
// while it led (raftq.Handouts). When the leadership moves (a transfer, a
// rebalance, a drain, a node stopping, a failover) acknowledgements of
// its deliveries still arrive: in flight from the client, gathered on the
// consumer's node or in the settler, or sent later for messages the
// application was still working on. Dropped, they handed those messages
// out again after the application had acknowledged them. Instead:
//
//   - a former leader keeps its hand-outs, turns the settlements it gets
//     into the consumer and messages they name, and passes them on to the
//     leader (Config.SettleAtLeader), which settles them as its own
//     (SettleHeld); so do settlements the log refused because the
//     leadership was moving;
//   - a new leader stops delivering to its predecessor's consumers at once
//     (they attach again, under new IDs) but leaves the messages they hold
//     with them for OrphanGrace before it returns them to the queue, as
//     RabbitMQ returns a consumer's messages only once its channel is gone.

// OrphanGrace is how long a new leader leaves the messages its
// predecessor's consumers hold with them, for their acknowledgements to
// come through the former leader, before it hands them out again.
const OrphanGrace = 2 * time.Second

// HeldSettlement settles messages that Consumer holds, by message: Op is
// raftq.OpSettle, OpReturn or OpDiscard (with Cause).
type HeldSettlement struct {
	Op       raftq.Op
	Cause    queue.ReturnCause
	Consumer raftq.ConsumerID
	Messages []uint64
}

// settleAsFormer handles settlements of deliveries on a member that does
// not lead: it names them by consumer and message and passes them to the
// leader. False when this member leads (the caller settles them).
func (r *Replica) settleAsFormer(op raftq.Op, cause queue.ReturnCause, ids []uint64) bool {
	if r.isLeader() {
		return false
	}
	order, groups := r.byHolder(ids)
	list := make([]HeldSettlement, 0, len(order))
	for _, c := range order {
		list = append(list, HeldSettlement{Op: op, Cause: cause, Consumer: c, Messages: groups[c]})
	}
	r.settleAtLeader(list)
	return true
}

// settleAtLeader passes list to the leader, if there is a way.
func (r *Replica) settleAtLeader(list []HeldSettlement) {
	if len(list) == 0 || r.cfg.SettleAtLeader == nil {
		return
	}
	r.cfg.SettleAtLeader(list)
}

// SettleHeld settles messages by the consumer that holds them: the
// settlements a former leader passed on. ErrNotLeader unless this member
// leads. Acknowledgements join the settler's batch; returns and discards
// go to the log at once, as their deliveries' would.
func (r *Replica) SettleHeld(list []HeldSettlement) error {
	// Not before the orphans' detach is in the log: a message returned
	// ahead of it would go to a consumer that is not there.
	if !r.isLeader() || !r.orphansDetached.Load() {
		return ErrNotLeader
	}
	acks := false
	for _, s := range list {
		switch s.Op {
		case raftq.OpSettle:
			r.mu.Lock()
			r.toSettle[s.Consumer] = append(r.toSettle[s.Consumer], s.Messages...)
			r.mu.Unlock()
			acks = true
		case raftq.OpReturn, raftq.OpDiscard:
			r.propose(&raftq.Command{Op: s.Op, Consumer: s.Consumer, IDs: s.Messages, Cause: raftq.ReturnCause(s.Cause)})
		}
	}
	if acks {
		r.wakeSettler()
	}
	return nil
}

// proposedSettlement is a settlement entry the settler proposed.
type proposedSettlement struct {
	f raft.ApplyFuture
	s HeldSettlement
}

// passOnRefused waits for proposed entries and passes those the log
// refused because the leadership was moving or gone on to the leader. An
// entry raft may still commit (ErrLeadershipLost) is passed on too: a
// second settlement of a message its consumer no longer holds changes
// nothing.
func (r *Replica) passOnRefused(proposed []proposedSettlement) {
	var refused []HeldSettlement
	for _, p := range proposed {
		err := r.wait(p.f)
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
			errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			refused = append(refused, p.s)
		}
	}
	if len(refused) == 0 {
		return
	}
	r.log.Debug("settlements refused by the log while the leadership moved; passing them to the leader", "consumers", len(refused))
	r.settleAtLeader(refused)
}

// goTracked runs fn on a goroutine of the replica's wait group, which
// must call r.wg.Done; false once the replica is stopping.
func (r *Replica) goTracked(fn func()) bool {
	r.goMu.Lock()
	defer r.goMu.Unlock()
	if r.goStopped {
		return false
	}
	r.wg.Add(1)
	go fn()
	return true
}

// acksOf lists toSettle's acknowledgements by consumer, in consumer order.
func acksOf(toSettle map[raftq.ConsumerID][]uint64) []HeldSettlement {
	list := make([]HeldSettlement, 0, len(toSettle))
	for _, c := range sortedConsumers(toSettle) {
		list = append(list, HeldSettlement{Op: raftq.OpSettle, Consumer: c, Messages: toSettle[c]})
	}
	return list
}

// reapConsumers runs when this member starts leading: the consumers in the
// machine that are not attached here were attached to the previous
// leader. They are detached at once, so that nothing more is delivered to
// them, and after OrphanGrace those still holding messages are declared
// down, which returns the messages to the queue. Without a way for
// settlements to be passed on (a single member), they are down at once.
func (r *Replica) reapConsumers() {
	orphans := r.orphanConsumers()
	if len(orphans) == 0 {
		r.orphansDetached.Store(true)
		return
	}
	if r.cfg.SettleAtLeader == nil {
		// No member passes settlements on (one node): nothing can
		// settle their messages any more.
		for _, id := range orphans {
			r.propose(&raftq.Command{Op: raftq.OpConsumerDown, Consumer: id})
		}
		r.orphansDetached.Store(true)
		return
	}
	for _, id := range orphans {
		r.propose(&raftq.Command{Op: raftq.OpDetach, Consumer: id})
	}
	r.orphansDetached.Store(true) // raft appends in the order proposed
	r.goTracked(func() {
		defer r.wg.Done()
		t := time.NewTimer(OrphanGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.done:
			return
		}
		if !r.isLeader() {
			return // the next leader does this again
		}
		still := r.orphanConsumers()
		for _, id := range orphans {
			if slices.Contains(still, id) {
				r.propose(&raftq.Command{Op: raftq.OpConsumerDown, Consumer: id})
			}
		}
	})
}

// orphanConsumers lists the machine's consumers that are not attached
// here (other than this member's basic.get consumer).
func (r *Replica) orphanConsumers() []raftq.ConsumerID {
	r.fsm.mu.Lock()
	ids := r.fsm.m.AppendConsumerIDs(nil)
	r.fsm.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	gone := ids[:0]
	for _, id := range ids {
		if _, mine := r.consumers[id]; !mine && id != r.getter {
			gone = append(gone, id)
		}
	}
	return gone
}
