package replica

import (
	"time"

	"github.com/warrenmq/warren/cluster/linger"
)

// A leader may hold a publish for up to Config.PublishLinger when another
// arrived shortly before it (cluster/linger says when), so that the
// publishes of that moment go to raft together: raft stores them with one
// log write, each follower with one sync, and sends them in one
// AppendEntries. At 1,000 msg/s to one queue a hold of 2 ms took a third
// or more off the CPU the cluster spends per message, and added the hold
// to the confirm latency (docs/performance.md, thirty-ninth and
// forty-second sessions): on a quiet machine more than RabbitMQ's p99,
// so with Config.PublishLingerShare (the node's default) a leader holds
// only while its commits are slow enough to hide the hold (committail.go).
// While they are quicker, Config.PublishLingerBatch may still hold a
// publish until the next one arrives: a producer paced at 1,000 msg/s by
// a timer sends two or three back to back, each of which would otherwise
// wait out the previous one's log write and go in an entry of its own.
// At that rate pairs took 8% off the CPU per message and left the
// confirm p99 where it was (docs/performance.md, forty-third session),
// where holding for the whole linger added about 1.5 ms to it.
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
	// Guarded by Replica.pubMu.
	policy linger.Policy
	held   []heldEntry
	timer  *time.Timer
}

// heldEntry is a held publish's log entry and the epoch it was held in.
type heldEntry struct {
	entry []byte
	epoch uint64
}

// proposePublish appends a numbered publish's entry to the log, now or,
// held, with those that follow it within the linger. epoch is
// pendingEpoch when the publish was numbered. Called with pubMu held.
func (r *Replica) proposePublish(entry []byte, epoch uint64) {
	h := &r.linger
	if r.tail.share > 0 && len(h.held) == 0 {
		// Only between holds: a publish arriving while others are held
		// joins them, whatever the hold is now, to keep the log in order.
		r.setHold()
	}
	if h.policy.Wait() == 0 || !h.policy.Arrive(time.Now()) {
		r.raft.Apply(entry, 0)
		return
	}
	h.held = append(h.held, heldEntry{entry, epoch})
	switch {
	case h.policy.Full():
		r.sendHeld(false)
	case len(h.held) == 1:
		if h.timer == nil {
			h.timer = time.AfterFunc(h.policy.Wait(), r.lingerOver)
		} else {
			h.timer.Reset(h.policy.Wait())
		}
	}
}

// setHold sets the hold for the publishes that arrive until the next
// ones held are sent: the commit tail's, for up to linger.Batch of them;
// while commits are too quick for that, the whole linger for pairs (or
// Config.PublishLingerBatch); else none. Called with pubMu held.
func (r *Replica) setHold() {
	h := &r.linger
	switch wait := time.Duration(r.tail.wait.Load()); {
	case wait > 0: // never longer than the linger (committail.go)
		h.policy.SetWait(wait)
		h.policy.SetBatch(linger.Batch)
	case r.cfg.PublishLingerBatch > 0:
		h.policy.SetWait(r.cfg.PublishLinger)
		h.policy.SetBatch(r.cfg.PublishLingerBatch)
	default:
		h.policy.SetWait(0)
	}
}

// lingerOver sends the held publishes once the linger has passed. A run
// that comes early is the timer of held publishes already sent (it fired
// as they went, or before Reset armed it for the next ones): those it is
// armed for now are due later.
func (r *Replica) lingerOver() {
	r.pubMu.Lock()
	if !time.Now().Before(r.linger.policy.Due()) {
		r.sendHeld(true)
	}
	r.pubMu.Unlock()
}

// flushPublishes sends the held publishes now: the operation that follows
// must come after them in the log. Not from the FSM goroutine (pubMu).
func (r *Replica) flushPublishes() {
	if r.cfg.PublishLinger == 0 {
		return
	}
	r.pubMu.Lock()
	r.sendHeld(false)
	r.pubMu.Unlock()
}

// sendHeld appends the held publishes of the current epoch to the log;
// expired says the linger ran out. Called with pubMu held.
func (r *Replica) sendHeld(expired bool) {
	h := &r.linger
	if len(h.held) == 0 {
		return
	}
	h.policy.Release(expired, time.Now())
	if !expired {
		h.timer.Stop() // armed when the first was held
	}
	epoch := r.pendingEpoch.Load()
	for i, e := range h.held {
		if e.epoch == epoch {
			r.raft.Apply(e.entry, 0)
		}
		h.held[i] = heldEntry{}
	}
	h.held = h.held[:0]
}
