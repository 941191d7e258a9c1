package replica

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Prompt failover with long heartbeat timeouts.
//
// Queue groups run with long heartbeat and election timeouts (seconds),
// so that idle groups send few heartbeats; the node's failure detector
// (gossip) is what notices a dead leader. hashicorp/raft has no way to
// make a follower campaign at once, but its timeouts can be changed at
// run time (ReloadConfig), and a follower's heartbeat check reads the
// timeout afresh every time it runs. ReloadConfig with a shorter
// HeartbeatTimeout also wakes the follower loop, which then checks at
// once (raft.go runFollower: followerNotifyCh re-arms the timer with
// time.After(0); the check starts an election only if the leader has
// been silent for the new, shorter timeout).
//
// So LeaderSuspected, first, makes one surviving voter campaign at once,
// as a leadership transfer's TimeoutNow does: the voters are ranked by
// name (the failed node left out) and the k-th campaigns after k times
// campaignStagger if the group still has no leader, so that two do not
// split the vote. Such an election skips pre-vote and is granted by
// voters that still believe in the old leader; gossip has declared that
// leader's node dead, after its own suspicion period. This is what makes
// a killed leader's queues take publishes again within about the
// gossip's detection time, whatever the heartbeat timeout.
//
// Second, as the fallback when that candidate cannot win (its log is
// behind, or it is cut off too), it lowers this member's heartbeat and
// election timeouts
// to suspectTimeout, just above LeaderLeaseTimeout (raft requires
// HeartbeatTimeout ≥ LeaderLeaseTimeout, and the lease cannot be changed
// at run time); once the leader has been silent that long it wakes the
// check again by shortening the timeout by a millisecond. When the group
// has a leader again (or after a while without one) it restores the
// timeouts.
//
// Why it is safe: raft's safety never depends on timeouts; only when
// elections start does. The follower still elects only after hearing
// nothing from the leader for suspectTimeout, which is longer than the
// leader's lease and far longer than its heartbeat interval
// (HeartbeatTimeout/10): a wrong suspicion of a live, reachable leader
// starts no election. Pre-vote (on by default) keeps a member that cannot
// win from raising the term.

// suspectMargin is how far above LeaderLeaseTimeout the suspected
// timeout is, which leaves room to shorten it a millisecond at a time.
const suspectMargin = 100 * time.Millisecond

// failover is a replica's suspicion state. mu serialises the replica's
// ReloadConfig calls (a read-modify-write of raft's reloadable config).
type failover struct {
	mu sync.Mutex
	// base are the configured timeouts; fast is suspectTimeout. Zero for
	// a one-member group, which has nobody to fail over to.
	base raft.ReloadableConfig
	fast time.Duration

	suspecting atomic.Bool

	// drained and raised are the drain state (drain.go), under mu: a
	// drained follower's timeouts are raised, and restoreTimeouts keeps
	// them so.
	drained, raised bool
}

// init records the timeouts of a multi-member group's config.
func (f *failover) init(rc *raft.Config) {
	f.base.HeartbeatTimeout, f.base.ElectionTimeout = rc.HeartbeatTimeout, rc.ElectionTimeout
	f.fast = rc.LeaderLeaseTimeout + suspectMargin
	if f.fast >= rc.HeartbeatTimeout {
		f.fast = 0 // short timeouts already: nothing to gain
	}
}

// LeaderSuspected tells the replica that node has failed, as gossip
// reports it. If this member follows a leader on that node (or knows of
// no leader), it elects a new one as soon as the leader has been silent
// for a little over the leader's lease, instead of a full heartbeat
// timeout. It returns at once.
func (r *Replica) LeaderSuspected(node string) {
	if r.fo.fast == 0 || r.stopped.Load() || node == r.cfg.NodeID || r.Drained() {
		return // a drained member leaves the election to the others
	}
	if r.raft.State() == raft.Leader {
		return
	}
	if _, id := r.raft.LeaderWithID(); id != "" && string(id) != node {
		return
	}
	if !r.fo.suspecting.CompareAndSwap(false, true) {
		return
	}
	r.setTimeouts(r.fo.fast)
	go r.awaitLeader(node, true)
}

// expectLeader shortens the timeouts of a member that restarted until it
// hears of a leader, as LeaderSuspected does but without making anyone
// campaign: after a whole cluster restarts, no leader heartbeats and
// nobody would elect for a full heartbeat timeout; after one node
// restarts, the leader's next heartbeat (a tenth to a fifth of the
// timeout) arrives well before the shortened one runs out, and pre-vote
// keeps the member from disturbing it anyway.
func (r *Replica) expectLeader() {
	if r.fo.fast == 0 || !r.fo.suspecting.CompareAndSwap(false, true) {
		return
	}
	r.setTimeouts(r.fo.fast)
	go r.awaitLeader("", false)
}

// setTimeouts sets the heartbeat and election timeouts to d.
func (r *Replica) setTimeouts(d time.Duration) {
	r.fo.mu.Lock()
	defer r.fo.mu.Unlock()
	cur := r.raft.ReloadableConfig()
	cur.HeartbeatTimeout, cur.ElectionTimeout = d, d
	if err := r.raft.ReloadConfig(cur); err != nil {
		r.log.Warn("set raft timeouts", "timeout", d, "err", err)
	}
}

// restoreTimeouts puts the configured timeouts back.
func (r *Replica) restoreTimeouts() {
	r.fo.mu.Lock()
	defer r.fo.mu.Unlock()
	cur := r.raft.ReloadableConfig()
	cur.HeartbeatTimeout, cur.ElectionTimeout = r.fo.base.HeartbeatTimeout, r.fo.base.ElectionTimeout
	if r.fo.raised { // drained (drain.go)
		cur.HeartbeatTimeout, cur.ElectionTimeout = drainedTimeout, drainedTimeout
	}
	if err := r.raft.ReloadConfig(cur); err != nil {
		r.log.Warn("restore raft timeouts", "err", err)
	}
}

// campaignStagger is how long the k-th ranked survivor waits, times k,
// before campaigning after a leader's node failed.
const campaignStagger = 500 * time.Millisecond

// campaignRank is this member's place among the group's voters other
// than failed, by name; -1 if it is not one of them.
func (r *Replica) campaignRank(failed string) int {
	servers, err := r.Servers()
	if err != nil {
		return -1
	}
	var voters []string
	for id, voter := range servers {
		if voter && id != failed {
			voters = append(voters, id)
		}
	}
	slices.Sort(voters)
	return slices.Index(voters, r.cfg.NodeID)
}

// suspectPoll bounds how long awaitNewLeader sleeps between looks.
const suspectPoll = 100 * time.Millisecond

// awaitLeader makes this member campaign when its rank comes (if
// campaign is set), wakes raft's follower check once the suspected leader
// (on node; "" when none is known) has been silent for the short timeout,
// and restores the timeouts once the group has a leader elsewhere, or
// after four base heartbeat timeouts: the suspicion was wrong, or the
// group cannot elect (no quorum) and goes on with its usual timeouts.
func (r *Replica) awaitLeader(node string, campaign bool) {
	defer r.fo.suspecting.Store(false)
	defer r.restoreTimeouts()
	start := time.Now()
	deadline := start.Add(4 * r.fo.base.HeartbeatTimeout)
	timeout := r.fo.fast
	rank := -1
	if campaign {
		rank = r.campaignRank(node)
	}
	campaignAt := start.Add(time.Duration(rank) * campaignStagger)
	for {
		state := r.raft.State()
		_, id := r.raft.LeaderWithID()
		switch {
		case state == raft.Shutdown:
			return
		case state == raft.Leader, id != "" && string(id) != node:
			r.log.Debug("new leader after suspected failure", "failed", node, "leader", string(id))
			return
		case time.Now().After(deadline):
			r.log.Debug("no new leader after suspected failure", "failed", node)
			return
		}
		wait := suspectPoll
		if state == raft.Follower && rank >= 0 {
			if until := time.Until(campaignAt); until <= 0 {
				rank = -1 // once
				r.log.Debug("campaigning: the leader's node failed", "failed", node)
				go r.campaignNow("the leader's node failed")
			} else {
				wait = min(wait, until)
			}
		}
		if state == raft.Follower {
			// Silent since the last contact, or since the suspicion: a
			// member that just started has heard nobody yet, and should
			// give the leader a chance to heartbeat before it elects.
			silent := time.Since(r.raft.LastContact())
			if s := time.Since(start); s < silent {
				silent = s
			}
			if silent >= timeout && timeout > r.fo.fast-suspectMargin+time.Millisecond {
				// Shorter than before: raft checks at once.
				timeout -= time.Millisecond
				r.setTimeouts(timeout)
			} else if silent < timeout {
				wait = min(wait, timeout-silent+time.Millisecond)
			}
		}
		select {
		case <-r.done:
			return
		case <-time.After(wait):
		}
	}
}

// campaigner is a transport that can make this member campaign at once
// (cluster/transport's Transport.Campaign).
type campaigner interface {
	Campaign(ctx context.Context) error
}

// campaign starts the first election of a group this member has just
// bootstrapped, instead of waiting a heartbeat timeout for it: the other
// members start empty, so there is no leader to disturb.
func (r *Replica) campaign() {
	if _, id := r.raft.LeaderWithID(); id != "" || r.raft.State() != raft.Follower {
		return
	}
	r.campaignNow("first election")
}

// campaignNow makes this member start an election at once, as a
// leadership transfer's TimeoutNow would; why is for the log.
func (r *Replica) campaignNow(why string) {
	c, ok := r.cfg.Transport.(campaigner)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-r.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := c.Campaign(ctx); err != nil {
		r.log.Debug("campaign", "why", why, "err", err)
	}
}
