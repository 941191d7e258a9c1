package replica

import (
	"sync"
	"time"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// A settlement names deliveries by their IDs, which a member resolves to
// the consumer and message they stand for from what it has applied
// (byHolder). A member that has not applied the entry that handed a
// delivery out does not know it, and dropping its settlement there leaves
// the message checked out to a consumer whose channel believes it
// settled: the acknowledged message is neither gone nor handed out again,
// and holds a prefetch slot, until the consumer's channel closes. That
// happens to a new leader still applying its predecessors' entries, and
// to a follower behind the log that gets a settlement meant for the
// leader (a router whose leader was stale, a new leader's stream ended by
// a quick second change). So (settler.unknown):
//
//   - a leader that has not applied every committed entry yet settles
//     them again once it has (settler.whenApplied);
//   - a member that does not lead passes them to the leader by delivery ID
//     (Config.SettleDeliveriesAtLeader);
//   - a leader that has applied everything drops them: they were settled
//     already (settlements are sent again after a stream ends) or taken
//     back (a consumer timeout, a consumer declared down).

// appliedWait bounds how long a new leader's settlements of deliveries it
// does not know wait for it to apply its predecessors' entries.
const appliedWait = 10 * time.Second

// byHolder turns delivery IDs into message IDs grouped by the consumer
// holding them, and lists those this member does not know as held
// (raftq.Machine.HoldersOf).
func (c *core) byHolder(ids []uint64) (order []raftq.ConsumerID, groups map[raftq.ConsumerID][]uint64, unknown []uint64) {
	c.fsm.mu.Lock()
	defer c.fsm.mu.Unlock()
	return c.fsm.m.HoldersOf(ids)
}

// Knows reports whether this member has applied the handing-out of every
// delivery in ids and none of them is settled yet.
func (c *core) Knows(ids []uint64) bool {
	c.fsm.mu.Lock()
	defer c.fsm.mu.Unlock()
	for _, d := range ids {
		if _, _, ok := c.fsm.m.HeldBy(d); !ok {
			return false
		}
	}
	return true
}

// unknown settles deliveries byHolder did not know, as the comment
// at the top of this file says.
func (s *settler) unknown(op raftq.Op, cause queue.ReturnCause, unknown []uint64) {
	if len(unknown) == 0 {
		return
	}
	switch {
	case !s.r.isLeader():
		if s.r.cfg.SettleDeliveriesAtLeader == nil {
			return
		}
		s.r.log.Debug("passing settlements of deliveries this member does not know to the leader", "op", op, "count", len(unknown))
		s.r.cfg.SettleDeliveriesAtLeader(op, cause, unknown)
	case !s.r.leaderApplied.Load():
		s.r.log.Debug("settlements of deliveries not applied yet wait for the new leader to apply them", "op", op, "count", len(unknown))
		s.unapplied.mu.Lock()
		s.unapplied.list = append(s.unapplied.list, unknownSettlement{op: op, cause: cause, ids: append([]uint64(nil), unknown...)})
		start := !s.unapplied.waiting
		s.unapplied.waiting = true
		s.unapplied.mu.Unlock()
		if start && !s.r.goTracked(s.whenApplied) {
			s.unapplied.mu.Lock()
			s.unapplied.list, s.unapplied.waiting = nil, false
			s.unapplied.mu.Unlock()
		}
	}
}

// unknownSettlement is a settlement a new leader holds until it has
// applied its predecessors' entries.
type unknownSettlement struct {
	op    raftq.Op
	cause queue.ReturnCause
	ids   []uint64
}

// unappliedSettlements gathers them; one goroutine (settler.whenApplied)
// waits for the leader to catch up, however many arrive meanwhile.
type unappliedSettlements struct {
	mu      sync.Mutex
	list    []unknownSettlement
	waiting bool
}

// whenApplied settles what unapplied gathered once this leader has
// applied every entry committed before its election, or, if it stops
// leading first, passes it on as a member that does not lead would. It
// runs on the replica's wait group.
func (s *settler) whenApplied() {
	defer s.r.wg.Done()
	s.r.awaitApplied(appliedWait)
	s.unapplied.mu.Lock()
	list := s.unapplied.list
	s.unapplied.list, s.unapplied.waiting = nil, false
	s.unapplied.mu.Unlock()
	if s.r.stopped.Load() {
		return
	}
	if s.r.isLeader() && !s.r.leaderApplied.Load() {
		s.r.log.Warn("settlements of deliveries dropped: the new leader did not apply its predecessors' entries in time", "settlements", len(list))
		return
	}
	for _, u := range list {
		s.byOp(u.op, u.cause, u.ids)
	}
}

// byOp is Settle, Requeue or Discard, as op says.
func (s *settler) byOp(op raftq.Op, cause queue.ReturnCause, ids []uint64) {
	switch op {
	case raftq.OpSettle:
		s.r.Settle(ids)
	case raftq.OpReturn:
		s.r.Requeue(ids, cause)
	case raftq.OpDiscard:
		s.r.Discard(ids, cause)
	}
}
