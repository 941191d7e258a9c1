package replica

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// Settlements gather for up to SettleLinger before the settler proposes
// them. Nobody waits for a settlement's commit (an ack gets no answer), so
// this costs no latency, while a log entry per basic.ack, replicated and
// synced on every member, is what a consumer at a steady rate mostly
// costs the cluster: at 1,000 msg/s on three nodes, one entry for ten
// acks took a fifth off the CPU per message. Deliveries wait on it only
// through credit, so the settler waits no longer once a consumer has
// SettleDueAt of its acks in the batch (a prefetch of 1 to 4 is settled at
// once) or the batch holds MaxSettleBatch. A consumer's node gathers its
// acks by the same rule before it sends them to the leader
// (cluster/forward).
const (
	SettleLinger   = 10 * time.Millisecond
	MaxSettleBatch = 1024
)

// Credit is what the machine lets a consumer with opts hold unsettled.
func Credit(opts queue.ConsumeOptions) uint32 {
	if opts.Prefetch == 0 || opts.NoAck {
		return defaultCredit
	}
	return opts.Prefetch
}

// SettleDueAt is how many of a consumer's acknowledgements, gathered,
// should go at once: a quarter of its credit, which they hold back.
func SettleDueAt(credit uint32) int {
	return min(max(1, int((credit+3)/4)), MaxSettleBatch)
}

// settleDue reports whether the settlements in hand should be proposed
// now rather than wait for company: they hold back a quarter of some
// consumer's credit, settle basic.get deliveries, or are many.
func (t *consumerTable) settleDue() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := 0
	for c, ids := range t.toSettle {
		total += len(ids)
		if c == t.r.getter {
			// basic.get's: a get is a round trip through the log anyway,
			// and no cancel would flush them when the channel closes.
			return true
		}
		if ref := t.byID[c]; ref != nil && len(ids) >= SettleDueAt(ref.credit) {
			return true
		}
	}
	return total >= MaxSettleBatch
}

func sortedConsumers(m map[raftq.ConsumerID][]uint64) []raftq.ConsumerID {
	ids := make([]raftq.ConsumerID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

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
	batch := s.r.consumers.takeAcks()
	if batch == nil {
		return nil
	}
	acks := acksOf(batch)
	entries := make([][]byte, len(acks))
	for i, a := range acks {
		entries[i] = stamped(&raftq.Command{Op: raftq.OpSettle, Consumer: a.Consumer, IDs: a.Messages})
	}
	futures := s.r.pub.proposeWithPublishes(entries, ride)
	proposed := make([]proposedSettlement, len(acks))
	for i, a := range acks {
		proposed[i] = proposedSettlement{f: futures[i], s: a}
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
