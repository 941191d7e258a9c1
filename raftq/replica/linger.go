package replica

import (
	"time"
)

// A leader holds a publish for up to Config.PublishLinger when another
// arrived shortly before it, so that the publishes of that moment go to
// raft together: raft stores them with one log write, each follower with
// one sync, and sends them in one AppendEntries. At 1,000 msg/s a publish
// arrives every millisecond and a commit takes less than that, so without
// the hold every publish was an entry of its own, written and synced on
// every member and sent and answered on its own; a hold of 2 ms took 40%
// off the CPU the cluster spends per message, for about 1.3 ms more
// confirm latency (docs/performance.md, thirty-ninth session). Kafka's
// producers linger the same way (linger.ms, 5 ms by default since 4.0).
//
// Who gains nothing is not held:
//   - a publish that arrives longer than the linger after the one before
//     it goes at once: at that rate company would not come in time;
//   - a publisher that waits for each confirm before the next publish
//     never has company, and one whose confirm window is small sends its
//     window at once and then waits: a hold that runs out with nothing
//     arrived after its first quarter gained nothing and counts as a
//     miss, and after lingerMisses misses in a row the leader holds
//     nothing for lingerRest;
//   - lingerBatch publishes held together go at once: at high rates raft
//     batches by itself, and a hold would only add latency.
//
// Held publishes are entries already numbered (publisher, seq) and in
// pending; they stay in arrival order, and every later publish joins them
// until they go, so log order still follows seq order. Operations whose
// answer depends on what was published before them on the same member
// (basic.get, purge, a leadership transfer) send the held ones first.
// When this member stops leading, failPending answers held publishes with
// the rest; their entries are then dropped rather than appended should it
// lead again (pendingEpoch), so a publish nacked is never stored after.
type linger struct {
	wait time.Duration // Config.PublishLinger; 0 holds nothing
	// Guarded by Replica.pubMu.
	held   []heldEntry
	first  time.Time // when the first held publish arrived
	last   time.Time // when the previous publish arrived
	misses int       // held publishes in a row that stayed alone
	rest   time.Time // no hold before then (lingerMisses)
	timer  *time.Timer
}

// heldEntry is a held publish's log entry and the epoch it was held in.
type heldEntry struct {
	entry []byte
	epoch uint64
}

const (
	// lingerBatch held publishes go at once.
	lingerBatch = 16
	// lingerMisses held publishes in a row that met no company stop the
	// holding for lingerRest: the publisher waits for each confirm.
	lingerMisses = 3
	lingerRest   = time.Second
)

// proposePublish appends a numbered publish's entry to the log, now or,
// held, with those that follow it within the linger. epoch is
// pendingEpoch when the publish was numbered. Called with pubMu held.
func (r *Replica) proposePublish(entry []byte, epoch uint64) {
	l := &r.linger
	now := time.Now()
	hold := l.wait > 0 && (len(l.held) > 0 || now.Sub(l.last) < l.wait && now.After(l.rest))
	l.last = now
	if !hold {
		r.raft.Apply(entry, 0)
		return
	}
	l.held = append(l.held, heldEntry{entry, epoch})
	switch {
	case len(l.held) >= lingerBatch:
		r.sendHeld(false)
	case len(l.held) == 1:
		l.first = now
		if l.timer == nil {
			l.timer = time.AfterFunc(l.wait, r.lingerOver)
		} else {
			l.timer.Reset(l.wait)
		}
	}
}

// lingerOver sends the held publishes once the linger has passed.
func (r *Replica) lingerOver() {
	r.pubMu.Lock()
	r.sendHeld(true)
	r.pubMu.Unlock()
}

// flushPublishes sends the held publishes now: the operation that follows
// must come after them in the log. Not from the FSM goroutine (pubMu).
func (r *Replica) flushPublishes() {
	if r.linger.wait == 0 {
		return
	}
	r.pubMu.Lock()
	r.sendHeld(false)
	r.pubMu.Unlock()
}

// sendHeld appends the held publishes of the current epoch to the log;
// expired says the linger ran out, so a lone one counts as a miss. Called
// with pubMu held.
func (r *Replica) sendHeld(expired bool) {
	l := &r.linger
	if len(l.held) == 0 {
		return
	}
	if expired {
		if l.last.Sub(l.first) >= l.wait/4 {
			l.misses = 0
		} else if l.misses++; l.misses >= lingerMisses {
			l.misses = 0
			l.rest = time.Now().Add(lingerRest)
		}
	}
	epoch := r.pendingEpoch.Load()
	for i, h := range l.held {
		if h.epoch == epoch {
			r.raft.Apply(h.entry, 0)
		}
		l.held[i] = heldEntry{}
	}
	l.held = l.held[:0]
}
