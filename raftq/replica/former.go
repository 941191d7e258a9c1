package replica

import (
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// When the leadership moves (a transfer, a rebalance, a drain, a node
// stopping, a failover), the consumers attached through the old leader
// follow it, and acknowledgements of the old leader's deliveries still
// arrive: in flight from the client, gathered on the consumer's node or in
// the settler, or sent later for messages the application was still
// working on. RabbitMQ keeps a consumer's messages with it through a
// leader change; so does Warren:
//
//   - a delivery's ID is the machine's number for it (raftq.Effect.Delivery),
//     the same on every member, so any leader settles it;
//   - a consumer attaches to the new leader under its ID
//     (queue.ConsumeOptions.ID), keeping the messages it holds; the ones it
//     says it never received (lost with the old leader) return to the
//     queue first (raftq.Command.Resume);
//   - a new leader stops delivering to its predecessor's consumers at once
//     (consumerTable.reap) and declares down those that did not come back after
//     OrphanGrace or the queue's disconnected timeout, the longer
//     (disconnected.go): their node is gone or cut off;
//   - a former leader passes the settlements it still gets, and those the
//     log refused because the leadership was moving, on to the leader
//     (Config.SettleAtLeader), named by consumer and message (SettleHeld).

// OrphanGrace is how long at least a new leader waits for its
// predecessor's consumers to attach again before it returns the messages
// they hold to the queue (the disconnected timeout, when longer, is how
// long).
const OrphanGrace = 2 * time.Second

// HeldSettlement settles messages that Consumer holds, by message: Op is
// raftq.OpSettle, OpReturn or OpDiscard (with Cause); or, with Op
// raftq.OpDeadLetterSettled, it names at-least-once dead letters that
// every target confirmed (deadletter.go), and no consumer.
type HeldSettlement struct {
	Op       raftq.Op
	Cause    queue.ReturnCause
	Consumer raftq.ConsumerID
	Messages []uint64
}

// asFormer handles settlements of deliveries on a member that does
// not lead: it names them by consumer and message and passes them to the
// leader. False when this member leads (the caller settles them).
func (s *settler) asFormer(op raftq.Op, cause queue.ReturnCause, ids []uint64) bool {
	if s.r.isLeader() {
		return false
	}
	order, groups, unknown := s.r.byHolder(ids)
	list := make([]HeldSettlement, 0, len(order))
	for _, c := range order {
		list = append(list, HeldSettlement{Op: op, Cause: cause, Consumer: c, Messages: groups[c]})
	}
	s.atLeader(list)
	s.unknown(op, cause, unknown)
	return true
}

// atLeader passes list to the leader, if there is a way.
func (s *settler) atLeader(list []HeldSettlement) {
	if len(list) == 0 || s.r.cfg.SettleAtLeader == nil {
		return
	}
	s.r.cfg.SettleAtLeader(list)
}

// SettleHeld settles messages by the consumer that holds them: the
// settlements a former leader passed on. ErrNotLeader unless this member
// leads. Acknowledgements join the settler's batch; returns and discards
// go to the log at once, as their deliveries' would.
func (r *Replica) SettleHeld(list []HeldSettlement) error {
	// Not before the orphans' detach is in the log: a message returned
	// ahead of it would go to a consumer that is not there.
	if !r.isLeader() || !r.consumers.orphansDetached.Load() {
		return ErrNotLeader
	}
	acks := false
	for _, s := range list {
		switch s.Op {
		case raftq.OpSettle:
			r.consumers.queueAck(s.Consumer, s.Messages)
			acks = true
		case raftq.OpReturn, raftq.OpDiscard:
			r.propose(&raftq.Command{Op: s.Op, Consumer: s.Consumer, IDs: s.Messages, Cause: raftq.ReturnCause(s.Cause)})
		case raftq.OpDeadLetterSettled:
			r.propose(&raftq.Command{Op: raftq.OpDeadLetterSettled, IDs: s.Messages})
		}
	}
	if acks {
		r.settler.wakeUp()
	}
	return nil
}

// Deliveries lists the deliveries consumer holds, whichever leader made
// them: a consume stream that attaches a consumer again takes them in its
// charge, to return them if the consumer's node goes away.
func (c *core) Deliveries(consumer uint64) []uint64 {
	c.fsm.mu.Lock()
	defer c.fsm.mu.Unlock()
	return c.fsm.m.AppendDeliveries(raftq.ConsumerID(consumer), nil)
}

// proposedSettlement is a settlement entry the settler proposed.
type proposedSettlement struct {
	f raft.ApplyFuture
	s HeldSettlement
}

// passOnRefused waits for proposed entries and passes those the log
// refused because the leadership was moving or gone, or this member
// stopped, on to the leader. An entry raft may still commit
// (ErrLeadershipLost, ErrRaftShutdown) is passed on too: a second
// settlement of a message its consumer no longer holds changes nothing.
func (s *settler) passOnRefused(proposed []proposedSettlement) {
	var refused []HeldSettlement
	for _, p := range proposed {
		err := s.r.wait(p.f)
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
			errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrRaftShutdown) {
			refused = append(refused, p.s)
		}
	}
	if len(refused) == 0 {
		return
	}
	s.r.log.Debug("settlements refused by the log while the leadership moved; passing them to the leader", "consumers", len(refused))
	s.atLeader(refused)
}

// acksOf lists toSettle's acknowledgements by consumer, in consumer order.
func acksOf(toSettle map[raftq.ConsumerID][]uint64) []HeldSettlement {
	list := make([]HeldSettlement, 0, len(toSettle))
	for _, c := range sortedConsumers(toSettle) {
		list = append(list, HeldSettlement{Op: raftq.OpSettle, Consumer: c, Messages: toSettle[c]})
	}
	return list
}

// reap runs when this member starts leading: the consumers in the
// machine that are not attached here were attached to the previous
// leader. They are detached at once, so that nothing more is delivered to
// them until they attach here again, under the same ID, keeping the
// messages they hold (Consume). After OrphanGrace, or the disconnected
// timeout if longer, those that did not are declared down, which returns
// their messages to the queue: their node is gone or cut off, or their
// channel closed meanwhile. Cancelled consumers and getters
// (owned.go) of a node start that is alive keep theirs for their channels
// (Config.StartAlive). Without a way for settlements to be passed on (a
// single member), they are down at once.
func (t *consumerTable) reap() {
	t.attachMu.Lock()
	defer t.attachMu.Unlock()
	orphans := t.orphanConsumers()
	if len(orphans) == 0 {
		t.orphansDetached.Store(true)
		return
	}
	if t.r.cfg.SettleAtLeader == nil {
		// No member passes settlements on (one node): nothing can
		// settle their messages any more.
		for _, id := range orphans {
			t.r.propose(&raftq.Command{Op: raftq.OpConsumerDown, Consumer: id})
		}
		t.orphansDetached.Store(true)
		return
	}
	set := &orphanSet{ids: make(map[raftq.ConsumerID]bool, len(orphans))}
	var cmds []*raftq.Command // detaches and suspends
	// held: cancelled consumers and getters, whose messages wait for
	// their channels to settle them.
	held := make(map[raftq.ConsumerID]bool)
	t.r.fsm.mu.Lock()
	for _, id := range orphans {
		set.ids[id] = true
		if t.r.fsm.m.Cancelled(id) || t.r.fsm.m.Getter(id) {
			held[id] = true
			continue
		}
		// Not the exclusive or single active consumer either: that one
		// stays attached, suspended, so that nobody takes its place
		// meanwhile and nothing is handed to it before it is back
		// (RabbitMQ keeps a suspected-down consumer active); at machine
		// version 1, only attached (Disconnect says why).
		switch {
		case !t.r.fsm.m.Keeps(id):
			cmds = append(cmds, &raftq.Command{Op: raftq.OpDetach, Consumer: id})
		case t.r.fsm.m.Suspends():
			cmds = append(cmds, &raftq.Command{Op: raftq.OpSuspend, Consumer: id})
		}
	}
	t.r.fsm.mu.Unlock()
	for _, c := range cmds {
		t.r.propose(c)
	}
	t.mu.Lock()
	t.orphans = set
	t.mu.Unlock()
	t.orphansDetached.Store(true) // raft appends in the order proposed
	t.r.goTracked(func() {
		defer t.r.wg.Done()
		// Those that do not follow within OrphanGrace are cut off from
		// here, or gone, or their channel closed meanwhile. Those of a
		// node start that is gone (restarted since, or departed) are
		// let go then; the others keep their messages for the
		// disconnected timeout, if it is longer (disconnected.go), and
		// NodeGone lets go of theirs should their node restart or leave
		// meanwhile.
		rest := t.r.DisconnectedTimeout() - OrphanGrace
		if !t.r.sleep(OrphanGrace) || !t.reapOrphans(set, orphans, held, rest <= 0) || rest <= 0 {
			return
		}
		if t.r.sleep(rest) {
			t.reapOrphans(set, orphans, held, true)
		}
	})
}

// reapOrphans declares down the orphans of a reap (set) that have not
// attached again: with final, all but the cancelled consumers and getters
// (held) of a node start that is alive; otherwise those of a node start
// that is gone. False when this member no longer owns the reap.
func (t *consumerTable) reapOrphans(set *orphanSet, orphans []raftq.ConsumerID, held map[raftq.ConsumerID]bool, final bool) bool {
	if !t.r.isLeader() {
		return false // the next leader does this again
	}
	t.mu.Lock()
	if t.orphans != set {
		t.mu.Unlock()
		return false // a later leadership's reap owns them now
	}
	var down []raftq.ConsumerID
	for _, id := range orphans {
		if !set.ids[id] {
			continue // attached again, or let go (NodeGone)
		}
		tag := consumerNode(uint64(id))
		if t.r.cfg.StartGone != nil && t.r.cfg.StartGone(tag) {
			down = append(down, id)
			delete(set.ids, id)
			continue
		}
		if !final {
			continue
		}
		if held[id] && t.r.cfg.StartAlive != nil && t.r.cfg.StartAlive(tag) {
			// Its node is up, so its channel may still settle what it
			// holds, as RabbitMQ lets it: those settlements, and the
			// release when the channel closes, are sent until a leader
			// takes them, and NodeGone returns them should the node
			// go.
			continue
		}
		down = append(down, id)
	}
	if final {
		t.orphans = nil
	}
	t.mu.Unlock()
	expired := final && t.r.DisconnectedTimeout() > OrphanGrace
	for _, id := range down {
		t.declareDown(id, expired && (t.r.cfg.StartGone == nil || !t.r.cfg.StartGone(consumerNode(uint64(id)))))
	}
	return true
}

// declareDown declares a consumer down, which returns what it holds. One
// whose node was cut off for the whole disconnected timeout (expired) has
// its messages returned first without counting a failed delivery, as
// rabbit_fifo returns a suspected-down consumer's on that timeout: one
// still in its place (an exclusive or single active one) is suspended, so
// they are not handed back to it, and its successor gets them first.
func (t *consumerTable) declareDown(id raftq.ConsumerID, expired bool) {
	t.r.fsm.mu.Lock()
	// (At machine version 1 one kept in its place is not suspended: what
	// it holds would go back to it, so its going down returns it all.)
	inPlace := t.r.fsm.m.Keeps(id) && !t.r.fsm.m.Suspended(id)
	t.r.fsm.mu.Unlock()
	t.r.settler.flush() // its acks in hand first (SettleOwned says why)
	if expired && !inPlace {
		t.r.Requeue(t.r.Deliveries(uint64(id)), queue.ReturnDisconnected)
	}
	t.r.propose(&raftq.Command{Op: raftq.OpConsumerDown, Consumer: id})
}

// NodeGone lets go of what the consumers of a node's start (BootOf) that
// gossip reports restarted or gone hold, if this member leads: their
// channels are gone, and the messages they held return to the queue.
// Those are its cancelled consumers and getters (owned.go), consumers
// detached when their streams broke (forward's disconnected.go), and
// its consumers that an earlier leader had and that have not followed
// (consumerTable.reap). A start reported failed (failed) may only be cut off:
// its consumers keep what they hold for the disconnected timeout
// (disconnected.go), and only if it is not back by then do they let go.
// (Consumers attached here are handled when their streams end.)
func (r *Replica) NodeGone(node string, failed bool) {
	if !r.isLeader() {
		return
	}
	tag := NodeTag(node)
	if failed {
		if t := r.DisconnectedTimeout(); t > 0 {
			time.AfterFunc(t, func() {
				if r.cfg.StartAlive == nil || !r.cfg.StartAlive(tag) {
					r.consumers.letGo(node, tag, r.cfg.StartGone == nil || !r.cfg.StartGone(tag))
				}
			})
			return
		}
	}
	r.consumers.letGo(node, tag, false)
}

// letGo declares down the detached consumers and getters of the node
// start whose tag is tag; expired when they waited out the disconnected
// timeout (declareDown).
func (t *consumerTable) letGo(node string, tag uint32, expired bool) {
	if !t.r.isLeader() {
		return
	}
	t.r.fsm.mu.Lock()
	ids := t.r.fsm.m.AppendConsumerIDs(nil)
	gone := ids[:0]
	for _, id := range ids {
		if consumerNode(uint64(id)) == tag && id != t.r.getter && (t.r.fsm.m.Cancelled(id) || t.r.fsm.m.Getter(id)) {
			gone = append(gone, id)
		}
	}
	t.r.fsm.mu.Unlock()
	t.mu.Lock()
	if t.orphans != nil {
		for id := range t.orphans.ids {
			if consumerNode(uint64(id)) == tag {
				if !slices.Contains(gone, id) {
					gone = append(gone, id)
				}
				delete(t.orphans.ids, id)
			}
		}
	}
	t.mu.Unlock()
	for _, id := range gone {
		t.declareDown(id, expired)
	}
	if len(gone) > 0 {
		t.r.log.Info("returned the messages of a gone node's consumers and gets", "node", node, "consumers", len(gone))
	}
}

// orphanSet is one reap's detached consumers still to come back.
type orphanSet struct{ ids map[raftq.ConsumerID]bool }

// orphanConsumers lists the machine's consumers that are not attached
// here (other than this member's basic.get consumer).
func (t *consumerTable) orphanConsumers() []raftq.ConsumerID {
	t.r.fsm.mu.Lock()
	ids := t.r.fsm.m.AppendConsumerIDs(nil)
	t.r.fsm.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	gone := ids[:0]
	for _, id := range ids {
		if _, mine := t.byID[id]; !mine && id != t.r.getter {
			gone = append(gone, id)
		}
	}
	return gone
}
