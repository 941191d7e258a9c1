package replica

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/raftq"
)

// settler proposes the acknowledgements the consumer table collects in
// batches, on a goroutine of its own, and passes settlements this member
// cannot carry out on: to the leader when it does not lead (former.go),
// or until it has applied its predecessors' entries (unknown.go).
type settler struct {
	r *Replica

	wake chan struct{}
	// started: the settler goroutine runs (wake starts it).
	started atomic.Bool
	// proposeMu is held from taking settlements out of toSettle until they
	// are proposed, so that flush returns only once everything
	// acknowledged before it is in the log's order ahead of what follows.
	proposeMu sync.Mutex
	// unapplied holds settlements of deliveries a new leader has not
	// applied yet (unknown.go).
	unapplied unappliedSettlements
}

func (s *settler) wakeUp() {
	if !s.started.Load() {
		// The settler starts with the first settlement: most of a
		// node's thousand queues may never see one, and an idle
		// goroutine still costs a stack.
		s.r.goMu.Lock()
		if !s.r.goStopped && !s.started.Load() {
			s.started.Store(true)
			s.r.wg.Add(1)
			go s.run()
		}
		s.r.goMu.Unlock()
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run proposes settlements in batches: acks, and no-ack deliveries
// (which the machine counted against the consumer's credit when it handed
// them out). It does not wait for a batch to commit: raft already writes
// every entry proposed meanwhile with one fsync, and waiting would add a
// commit to the time a consumer's credit takes to come back. A batch that
// gathered for the whole SettleLinger (nobody's credit waits on it) goes
// with the publishes held for company, or the next ones (linger.go).
func (s *settler) run() {
	defer s.r.wg.Done()
	for {
		select {
		case <-s.wake:
		case <-s.r.done:
			return
		}
		due, ok := s.gather()
		if !ok {
			return
		}
		s.passOnRefusedLater(s.propose(!due))
	}
}

// flush proposes the settlements in hand, and returns once
// every settlement taken before it, by it or by the settler, is proposed.
func (s *settler) flush() {
	s.passOnRefusedLater(s.propose(false))
}

// passOnRefusedLater passes the proposed settlements the log refuses
// because the leadership moves on to the next leader, in the background
// (former.go).
func (s *settler) passOnRefusedLater(proposed []proposedSettlement) {
	if len(proposed) > 0 && s.r.cfg.SettleAtLeader != nil {
		s.r.goTracked(func() {
			defer s.r.wg.Done()
			s.passOnRefused(proposed)
		})
	}
}

// propose proposes the settlements in hand and returns the
// entries (a future may be waited on by one goroutine only). With
// publishes held they go along (sending them now, unless ride), and with
// ride they may wait for the next publish, up to the publish linger.
func (s *settler) propose(ride bool) []proposedSettlement {
	s.proposeMu.Lock()
	defer s.proposeMu.Unlock()
	s.r.consumers.mu.Lock()
	batch := s.r.consumers.toSettle
	if len(batch) == 0 {
		s.r.consumers.mu.Unlock() // batch is the live map: leave it alone
		return nil
	}
	s.r.consumers.toSettle = make(map[raftq.ConsumerID][]uint64, len(batch))
	s.r.consumers.mu.Unlock()
	acks := acksOf(batch)
	entries := make([][]byte, len(acks))
	for i, s := range acks {
		entries[i] = stamped(&raftq.Command{Op: raftq.OpSettle, Consumer: s.Consumer, IDs: s.Messages})
	}
	futures := s.r.pub.proposeWithPublishes(entries, ride)
	proposed := make([]proposedSettlement, len(acks))
	for i, s := range acks {
		proposed[i] = proposedSettlement{f: futures[i], s: s}
	}
	return proposed
}

// beforeTransfer commits the settlements in hand, and appends the
// publishes held (linger.go), before this leader asks raft to move the
// leadership: raft refuses entries while a transfer runs, acks left in
// hand would otherwise reach the next leader only by being passed on, and
// held publishes would wait for this member to stop leading to be nacked.
func (s *settler) beforeTransfer() {
	s.r.pub.flush()
	s.passOnRefused(s.propose(false))
}

// gather waits until the settlements in hand are due
// (settleDue) or SettleLinger has passed, and says which; false if the
// replica stopped.
func (s *settler) gather() (due, ok bool) {
	deadline := time.Now().Add(SettleLinger)
	for !s.r.consumers.settleDue() {
		wait := time.Until(deadline)
		if wait <= 0 {
			return false, true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			return false, true
		case <-s.wake: // more came: due now?
			t.Stop()
		case <-s.r.done:
			t.Stop()
			return false, false
		}
	}
	return true, true
}
