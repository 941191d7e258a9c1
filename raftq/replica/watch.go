package replica

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
)

// The watcher looks after two things: the member's leadership and the
// machine's next deadline (a TTL expiry, a consumer timeout, x-expires).
// It runs only while there is something to look at: raft's observer hook,
// the FSM (stateChanged) and a timer for the next deadline wake it, and it
// ends when nothing more is due. A node carries a thousand idle queues; a
// goroutine each, waiting, was a sixth of its goroutines and their stacks,
// and a ticker each would add up to thousands of wake-ups a second.

// minTickGap is the least time between two time commands of a leader: a
// deadline the machine does not clear at once is looked at again this
// much later, not in a loop. It is also the least time between two looks
// prompted by applied entries.
const minTickGap = 100 * time.Millisecond

// barrierRetry is how soon a new leader whose barrier failed (without
// losing the leadership) tries again.
const barrierRetry = time.Second

// watcher is the watcher's state. The want flags say what woke it;
// looking is set while a look goroutine runs (or before the replica has
// started it, Open). The rest belongs to the look goroutine.
type watcher struct {
	r *Replica

	wantLook    atomic.Bool // leadership changed, or a deadline is due
	wantApplied atomic.Bool // the machine applied entries
	wantBarrier atomic.Bool // a follower answers again or fell idle behind (leader: resume it)
	looking     atomic.Bool

	timer                         *time.Timer // wakes wantLook; nil until first armed
	armed                         bool
	leading                       bool
	lastTick, lastAdapt, lastLook time.Time
}

// stateChanged tells the watcher that the machine applied an entry or a
// snapshot: its next deadline or size may have moved. It never blocks
// (the FSM goroutine calls it).
func (w *watcher) stateChanged() { w.wake(&w.wantApplied) }

// observe is raft's observer hook (Open registers it with no channel): it
// runs on raft's goroutines, so it only sets a flag.
func (w *watcher) observe(o *raft.Observation) bool {
	switch d := o.Data.(type) {
	case raft.LeaderObservation:
		w.wake(&w.wantLook)
		if d.LeaderID == "" && w.r.cfg.Transport != nil {
			w.r.fo.leaderLost() // failover.go
		}
	case raft.RaftState:
		w.wake(&w.wantLook)
		if d == raft.Candidate && w.r.cfg.Transport != nil {
			w.r.fo.leaderLost() // watches the candidacy (failover.go)
		}
	case raft.ResumedHeartbeatObservation, raft.RequestPreVoteRequest:
		// A follower that was unreachable (restarted, or a new member
		// whose group was not open yet) answers heartbeats again, or asks
		// for a pre-vote: it has not heard from this leader, as a member
		// that just started asks at once (failover.go), before raft's
		// heartbeats, which back off from a follower that does not
		// answer, try it again. raft retries its log replication only
		// when entries are appended or every CommitTimeout, which is long
		// so that idle groups stay quiet: an entry brings it up to date,
		// and tells it who leads, now.
		if w.r.cfg.Transport != nil {
			w.wake(&w.wantBarrier)
		}
	}
	return false
}

// wake sets want and starts the look goroutine unless it runs.
func (w *watcher) wake(want *atomic.Bool) {
	want.Store(true)
	if !w.looking.CompareAndSwap(false, true) {
		return // the running one sees want
	}
	w.r.goMu.Lock()
	if w.r.goStopped {
		w.r.goMu.Unlock()
		return // looking stays set: nothing starts any more
	}
	w.r.wg.Add(1)
	w.r.goMu.Unlock()
	go w.look()
}

// start starts the watcher once Open is done; until then wakes
// only set their flags. leading says whether Open ran onLeading.
func (w *watcher) start(leading bool) {
	w.leading = leading
	w.looking.Store(false)
	w.wake(&w.wantLook)
}

// look runs while something wants looking at. A new leader first applies
// everything committed before it (a barrier), so that what onLeading
// resumes reflects the whole log.
func (w *watcher) look() {
	defer w.r.wg.Done()
	for {
		select {
		case <-w.r.done:
			return
		default:
		}
		barrier, look, applied := w.wantBarrier.Swap(false), w.wantLook.Swap(false), w.wantApplied.Swap(false)
		if !barrier && !look && !applied {
			w.looking.Store(false)
			// A wake between the swaps and the store saw looking set and
			// left its flag to this goroutine: take it back.
			if (w.wantBarrier.Load() || w.wantLook.Load() || w.wantApplied.Load()) && w.looking.CompareAndSwap(false, true) {
				continue
			}
			return
		}
		if barrier && w.r.isLeader() {
			w.r.raft.Barrier(0)
		}
		if !look && !applied {
			continue
		}
		if since := time.Since(w.lastLook); !look && since < minTickGap {
			// A busy queue applies thousands of entries a second: look
			// at the machine at most every minTickGap, as the timer
			// will once the gap has passed.
			if !w.armed {
				w.arm(minTickGap - since)
			}
			continue
		}
		if w.lookOnce() {
			return
		}
	}
}

// arm makes the timer wake the watcher after d.
func (w *watcher) arm(d time.Duration) {
	if w.timer == nil {
		w.timer = time.AfterFunc(d, func() { w.wake(&w.wantLook) })
	} else {
		w.timer.Reset(d)
	}
	w.armed = true
}

// lookOnce checks the leadership and the machine's deadline. It reports
// whether the watcher is done for good (the replica stopped).
func (w *watcher) lookOnce() (stop bool) {
	w.lastLook = time.Now()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.armed = false
	retryAt := time.Duration(0)

	switch now := w.r.isLeader(); {
	case now && !w.leading:
		if err := w.r.wait(w.r.raft.Barrier(10 * time.Second)); err != nil {
			w.r.log.Debug("barrier after election", "err", err)
			retryAt = barrierRetry // lost it again (the observer says so), or slow
			break
		}
		w.leading = true
		w.r.leaderApplied.Store(true)
		w.r.log.Debug("leading")
		w.onLeading()
	case !now && w.leading:
		w.leading = false
		w.r.leaderApplied.Store(false)
		if w.r.stopped.Load() {
			// Closed or deleted, not deposed: consumers hear Gone
			// (delete) or nothing (node shutdown), not LeaderLost.
			return true
		}
		w.r.log.Debug("stopped leading", "leader", w.r.Leader())
		w.onFollowing()
	}

	w.r.fsm.mu.Lock()
	at, due := w.r.fsm.m.NextDeadline()
	live := liveCount(w.r.fsm.m)
	sinceSnap := w.r.fsm.sinceSnap
	w.r.fsm.mu.Unlock()
	w.r.storage.snapshotWhenDue(sinceSnap)
	// Every member snapshots on its own, followers too. At most once a
	// second; a skipped look is made up for by the timer.
	if since := time.Since(w.lastAdapt); since >= time.Second {
		w.lastAdapt = time.Now()
		w.r.fo.adaptSnapshotThreshold(live)
	} else {
		retryAt = time.Second - since
	}
	if w.leading && due {
		now := time.Now()
		wait := time.UnixMilli(at).Sub(now)
		if gap := minTickGap - now.Sub(w.lastTick); wait < gap {
			wait = gap
		}
		if wait <= 0 {
			w.lastTick = now
			// Its commit wakes the watcher again through stateChanged;
			// if it fails, the timer looks again.
			w.r.wait(w.r.propose(&raftq.Command{Op: raftq.OpTick}))
			wait = minTickGap
		}
		if retryAt == 0 || wait < retryAt {
			retryAt = wait
		}
	}
	if retryAt > 0 {
		w.arm(retryAt)
	}
	return false
}
