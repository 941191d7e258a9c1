package replica

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/linger"
)

// A leader may hold a publish for up to Config.PublishLinger when another
// arrived shortly before it (raftq/linger says when), so that the
// publishes of that moment go to raft together: raft stores them with one
// log write, each follower with one sync, and sends them in one
// AppendEntries. At 1,000 msg/s to one queue a hold of 2 ms took a third
// or more off the CPU the cluster spends per message, and added the hold
// to the confirm latency (docs/performance.md): on a quiet machine more than RabbitMQ's p99,
// so with Config.PublishLingerShare (the node's default) a leader holds
// only while its commits are slow enough to hide the hold (committail.go).
// While they are quicker, Config.PublishLingerBatch may still hold
// publishes, but only until that many are held: with 2, a publish waits
// at most for the next one; at 1,000 msg/s, publishes about a millisecond
// apart, pairs took 8% off the CPU per message and left the confirm p99
// where it was, and threes (the node's default) about a fifth, the
// confirm p50 about 1 ms later and the p99 0.35-0.4 ms, where holding for the
// whole linger added about 1.5 ms to the p99.
//
// Settlements go along: the settler's batches (one every SettleLinger at
// a steady rate) join the publishes held, or wait for the next ones while
// publishes are coming (proposeWithPublishes), rather than take a log
// write, syncs and AppendEntries of their own. At 1,000 msg/s with a
// consumer that took about 15% off the syncs of the leader and of the
// follower it waits for, at no cost to the confirms (docs/performance.md).
//
// Held publishes are entries already numbered (publisher, seq) and in
// pending; they stay in arrival order, and every later publish joins them
// until they go, so log order still follows seq order. Operations whose
// answer depends on what was published before them on the same member
// (basic.get, purge, a leadership transfer) send the held ones first.
// When this member stops leading, failPending answers held publishes with
// the rest; their entries are then dropped rather than appended should it
// lead again (pendingEpoch), so a publish nacked is never stored after.
type heldPublishes struct {
	// Guarded by publishes.mu.
	policy linger.Policy
	held   []heldEntry
	timer  *time.Timer
}

// heldEntry is a held publish's log entry and the epoch it was held in,
// or a settlement's entry and the ride it goes with.
type heldEntry struct {
	entry []byte
	epoch uint64
	ride  *settleRide
}

// settleRide is settlements held with publishes: their futures, in order,
// once the held entries went to the log and sent is closed.
type settleRide struct {
	futures []raft.ApplyFuture
	sent    chan struct{}
}

// proposePublish appends a numbered publish's entry to the log, now or,
// held, with those that follow it within the linger. epoch is
// pendingEpoch when the publish was numbered. Called with mu held.
func (p *publishes) proposePublish(entry []byte, epoch uint64) {
	if !p.arrive() {
		p.core.raft.Apply(entry, 0)
		return
	}
	p.keep(heldEntry{entry: entry, epoch: epoch})
}

// arrive records an entry arriving for the log and says whether it is to
// be held: it joins the entries held, or starts a hold as the policy
// allows. Called with mu held.
func (p *publishes) arrive() bool {
	h := &p.linger
	if p.tail.share > 0 && len(h.held) == 0 {
		// Only between holds: an entry arriving while others are held
		// joins them, whatever the hold is now, to keep the log in order.
		p.setHold()
	}
	return h.policy.Wait() > 0 && h.policy.Arrive(time.Now())
}

// keep adds entries arrive held to those held: all of them go if the
// batch is full; the first held start the linger's timer. Called with
// mu held.
func (p *publishes) keep(entries ...heldEntry) {
	h := &p.linger
	first := len(h.held) == 0
	h.held = append(h.held, entries...)
	switch {
	case h.policy.Full():
		p.sendHeld(false)
	case !first:
	case h.timer == nil:
		h.timer = time.AfterFunc(h.policy.Wait(), p.lingerOver)
	default:
		h.timer.Reset(h.policy.Wait())
	}
}

// setHold sets the hold for the publishes that arrive until the next
// ones held are sent: the commit tail's, for up to linger.Batch of them;
// while commits are too quick for that, the whole linger for up to
// Config.PublishLingerBatch of them; else none. Called with mu held.
func (p *publishes) setHold() {
	h := &p.linger
	switch wait := time.Duration(p.tail.wait.Load()); {
	case wait > 0: // never longer than the linger (committail.go)
		h.policy.SetWait(wait)
		h.policy.SetBatch(linger.Batch)
	case p.core.cfg.PublishLingerBatch > 0:
		h.policy.SetWait(p.core.cfg.PublishLinger)
		h.policy.SetBatch(p.core.cfg.PublishLingerBatch)
	default:
		h.policy.SetWait(0)
	}
}

// lingerOver sends the held publishes once the linger has passed. A run
// that comes early is the timer of held publishes already sent (it fired
// as they went, or before Reset armed it for the next ones): those it is
// armed for now are due later.
func (p *publishes) lingerOver() {
	p.mu.Lock()
	if !time.Now().Before(p.linger.policy.Due()) {
		p.sendHeld(true)
	}
	p.mu.Unlock()
}

// flush sends the held publishes now: the operation that follows
// must come after them in the log. Not from the FSM goroutine (mu).
func (p *publishes) flush() {
	if p.core.cfg.PublishLinger == 0 {
		return
	}
	p.mu.Lock()
	p.sendHeld(false)
	p.mu.Unlock()
}

// sendHeld appends the held publishes of the current epoch to the log;
// expired says the linger ran out. Called with mu held.
func (p *publishes) sendHeld(expired bool) {
	h := &p.linger
	if len(h.held) == 0 {
		return
	}
	h.policy.Release(expired, time.Now())
	if !expired {
		h.timer.Stop() // armed when the first was held
	}
	epoch := p.pendingEpoch.Load()
	for i, e := range h.held {
		switch {
		case e.ride != nil:
			// Not dropped with the epoch: a settlement is not answered
			// by failPending, and one the log refuses is passed on.
			e.ride.futures = append(e.ride.futures, p.core.raft.Apply(e.entry, 0))
			if i+1 == len(h.held) || h.held[i+1].ride != e.ride {
				close(e.ride.sent)
			}
		case e.epoch == epoch:
			p.core.raft.Apply(e.entry, 0)
		}
		h.held[i] = heldEntry{}
	}
	h.held = h.held[:0]
}

// proposeWithPublishes appends settlement entries to the log and returns
// their futures. Each entry costs the log a write and every member a sync
// and an AppendEntries, whatever it carries, and at a steady rate the
// settler proposes a batch every SettleLinger: with publishes held they go
// along, sent now unless ride; with ride and none held, they wait for the
// next publish, up to the publish hold (linger.Policy, which also says
// whether publishes are coming at all), and the consumer's credit does not
// wait for them (the settler rides only batches nobody's credit waits on).
// Not called with mu held.
func (p *publishes) proposeWithPublishes(entries [][]byte, ride bool) []raft.ApplyFuture {
	if p.core.cfg.PublishLinger > 0 {
		if w := p.holdSettlements(entries, ride); w != nil {
			select {
			case <-w.sent:
				return w.futures
			case <-p.core.done:
				// Closing: the entries go with the held publishes (or the
				// linger's timer) to a raft shutting down.
				futures := make([]raft.ApplyFuture, len(entries))
				for i := range futures {
					futures[i] = errorFuture{raft.ErrRaftShutdown}
				}
				return futures
			}
		}
	}
	futures := make([]raft.ApplyFuture, len(entries))
	for i, e := range entries {
		futures[i] = p.core.raft.Apply(e, 0)
	}
	return futures
}

// holdSettlements holds entries with the publishes held (sending them
// all now unless ride), or, while ride allows it and publishes are coming,
// with the next ones; nil if they should go on their own.
func (p *publishes) holdSettlements(entries [][]byte, ride bool) *settleRide {
	p.mu.Lock()
	defer p.mu.Unlock()
	if (!ride && len(p.linger.held) == 0) || !p.arrive() {
		return nil
	}
	w := &settleRide{sent: make(chan struct{})}
	held := make([]heldEntry, len(entries))
	for i, e := range entries {
		held[i] = heldEntry{entry: e, ride: w}
	}
	p.keep(held...)
	if !ride {
		p.sendHeld(false) // if keep did not: they go now
	}
	return w
}

// errorFuture is the future of an entry that never reached raft.
type errorFuture struct{ err error }

func (f errorFuture) Error() error  { return f.err }
func (f errorFuture) Index() uint64 { return 0 }
func (f errorFuture) Response() any { return nil }
