package replica

import (
	"time"

	"github.com/hashicorp/raft"
)

// Draining a member (warrenctl drain): keeping it out of elections.
//
// hashicorp/raft has no "do not campaign" switch. Two ways come close:
// DemoteVoter, which makes the member a non-voter (it can never lead, but
// the group's quorum shrinks: a three-member group then tolerates no
// failure while the node is drained, and the demotion and the later
// promotion are membership changes that need the leader and a quorum), or
// raising the member's heartbeat and election timeouts with ReloadConfig,
// which keeps it from starting an election while it still votes and
// replicates, so the group's fault tolerance is unchanged. Warren raises
// the timeouts: draining is for maintenance, when another failure is the
// thing to survive, and it needs no configuration change to undo.
//
// The limit: a member with long timeouts still becomes leader if a
// transfer names it or, once, if no other member can win an election
// (it then campaigns after drainedTimeout). Raised timeouts only suit a
// follower: a leader heartbeats every tenth of its heartbeat timeout, so
// a drained member that leads keeps its usual timeouts until its
// leadership has moved (the node moves it, then calls SetDrained again).

// drainedTimeout is a drained follower's heartbeat and election timeout.
const drainedTimeout = 10 * time.Minute

// SetDrained keeps this member out of elections (on) or lets it take part
// again (off). It is idempotent and cheap; the node calls it again after
// the member's leadership has moved, and periodically.
func (r *Replica) SetDrained(on bool) { r.fo.setDrained(on) }

// setDrained is SetDrained.
func (fo *failover) setDrained(on bool) {
	if fo.base.HeartbeatTimeout == 0 || fo.core.stopped.Load() {
		return // a one-member group: nobody else to lead it
	}
	raise := on && fo.core.raft.State() != raft.Leader
	fo.mu.Lock()
	fo.drained = on
	changed := fo.raised != raise
	fo.raised = raise
	fo.mu.Unlock()
	if !changed {
		return
	}
	if raise {
		fo.setTimeouts(drainedTimeout)
	} else {
		fo.restoreTimeouts()
	}
}

// Drained reports whether SetDrained(true) is in force.
func (r *Replica) Drained() bool { return r.fo.isDrained() }

// isDrained is Drained.
func (fo *failover) isDrained() bool {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	return fo.drained
}
