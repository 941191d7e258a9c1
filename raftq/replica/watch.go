package replica

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
)

// One goroutine per replica watches two things: its leadership (raft's
// LeaderCh) and the machine's next deadline (a TTL expiry, a consumer
// timeout, x-expires). It wakes only when one of them changes or a
// deadline is due, so that an idle queue costs no CPU: a node carries a
// thousand of them, and a ticker each would add up to thousands of
// wake-ups a second.

// minTickGap is the least time between two time commands of a leader: a
// deadline the machine does not clear at once is looked at again this
// much later, not in a loop.
const minTickGap = 100 * time.Millisecond

// barrierRetry is how soon a new leader whose barrier failed (without
// losing the leadership) tries again.
const barrierRetry = time.Second

// stateChanged tells the watcher that the machine applied an entry or a
// snapshot: its next deadline or size may have moved. It never blocks
// (the FSM goroutine calls it).
func (r *Replica) stateChanged() {
	select {
	case r.stateWake <- struct{}{}:
	default:
	}
}

// watch runs until the replica stops. A new leader first applies
// everything committed before it (a barrier), so that what onLeading
// resumes reflects the whole log.
func (r *Replica) watch() {
	defer r.wg.Done()
	leading := r.isLeader() && r.cfg.Transport == nil // onLeading ran in Open
	leaderCh := r.raft.LeaderCh()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	var lastTick, lastAdapt, lastLook time.Time
	for {
		applied := false
		select {
		case <-r.done:
			return
		case <-leaderCh:
		case <-r.stateWake:
			applied = true
		case <-timer.C:
			armed = false
		case <-r.resumed:
			// A follower that was unreachable (restarted, or a new member
			// whose group was not open yet) answers heartbeats again, or
			// asks for a pre-vote: it has not heard from this leader, as
			// a member that just started asks at once (failover.go),
			// before raft's heartbeats, which back off from a follower
			// that does not answer, try it again. raft retries its log
			// replication only when entries are appended or every
			// CommitTimeout, which is long so that idle groups stay
			// quiet: an entry brings it up to date, and tells it who
			// leads, now.
			if r.isLeader() {
				r.raft.Barrier(0)
			}
			continue
		}
		if since := time.Since(lastLook); applied && since < minTickGap {
			// A busy queue applies thousands of entries a second: look
			// at the machine at most every minTickGap, as the timer
			// will once the gap has passed.
			if !armed {
				timer.Reset(minTickGap - since)
				armed = true
			}
			continue
		}
		lastLook = time.Now()
		timer.Stop()
		armed = false
		retryAt := time.Duration(0)

		switch now := r.isLeader(); {
		case now && !leading:
			if err := r.wait(r.raft.Barrier(10 * time.Second)); err != nil {
				r.log.Debug("barrier after election", "err", err)
				retryAt = barrierRetry // lost it again (LeaderCh says so), or slow
				break
			}
			leading = true
			r.leaderApplied.Store(true)
			r.log.Debug("leading")
			r.onLeading()
		case !now && leading:
			leading = false
			r.leaderApplied.Store(false)
			if r.stopped.Load() {
				// Closed or deleted, not deposed: consumers hear Gone
				// (delete) or nothing (node shutdown), not LeaderLost.
				return
			}
			r.log.Debug("stopped leading", "leader", r.Leader())
			r.onFollowing()
		}

		r.fsm.mu.Lock()
		at, due := r.fsm.m.NextDeadline()
		live := liveCount(r.fsm.m)
		sinceSnap := r.fsm.sinceSnap
		r.fsm.mu.Unlock()
		r.snapshotWhenDue(sinceSnap)
		// Every member snapshots on its own, followers too. At most once
		// a second; a skipped look is made up for by the timer.
		if since := time.Since(lastAdapt); since >= time.Second {
			lastAdapt = time.Now()
			r.adaptSnapshotThreshold(live)
		} else {
			retryAt = time.Second - since
		}
		if leading && due {
			now := time.Now()
			wait := time.UnixMilli(at).Sub(now)
			if gap := minTickGap - now.Sub(lastTick); wait < gap {
				wait = gap
			}
			if wait <= 0 {
				lastTick = now
				// Its commit wakes this loop again through stateChanged;
				// if it fails, the timer looks again.
				r.wait(r.propose(&raftq.Command{Op: raftq.OpTick}))
				wait = minTickGap
			}
			if retryAt == 0 || wait < retryAt {
				retryAt = wait
			}
		}
		if retryAt > 0 {
			timer.Reset(retryAt)
			armed = true
		}
	}
}

// snapshotWhenDue starts a snapshot once the entries applied since the
// last one reach the snapshot threshold, without waiting for raft's own
// check (every SnapshotInterval, which is long: a thousand idle groups
// each waking often would add up). On a busy queue the log is then
// compacted every few tens of thousands of entries, so its space comes
// back segment by segment, in files the node's log recycles, instead of
// hundreds of megabytes at a time into new files.
func (r *Replica) snapshotWhenDue(sinceSnap uint64) {
	if sinceSnap < r.raft.ReloadableConfig().SnapshotThreshold || !r.snapping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.snapping.Store(false)
		err := r.raft.Snapshot().Error()
		if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrRaftShutdown) {
			r.log.Debug("snapshot", "err", err)
		}
	}()
}
