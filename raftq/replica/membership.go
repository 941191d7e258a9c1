package replica

import (
	"context"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Membership changes (cluster/node's membership.go drives them). Each
// must be made on the leader and returns once the new configuration is
// committed; index is its log index.

// Servers is the group's latest configuration as this member knows it:
// node name to whether it votes.
func (c *core) Servers() (map[string]bool, error) {
	f := c.raft.GetConfiguration()
	if err := errorFor(f.Error()); err != nil {
		return nil, err
	}
	out := make(map[string]bool)
	for _, s := range f.Configuration().Servers {
		out[string(s.ID)] = s.Suffrage == raft.Voter
	}
	return out, nil
}

// AddNonvoter adds node id at addr as a non-voter: the leader sends it
// the log (or a snapshot) but commits do not wait for it.
func (c *core) AddNonvoter(id, addr string) (index uint64, err error) {
	if !c.isLeader() {
		return 0, ErrNotLeader
	}
	if err := c.canJoin(id); err != nil {
		return 0, err
	}
	f := c.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 0)
	if err := errorFor(c.wait(f)); err != nil {
		return 0, err
	}
	return f.Index(), nil
}

// AddVoter makes node id at addr a voter (promoting a non-voter).
func (c *core) AddVoter(id, addr string) (index uint64, err error) {
	if !c.isLeader() {
		return 0, ErrNotLeader
	}
	f := c.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 0)
	if err := errorFor(c.waitPromotion(f)); err != nil {
		return 0, err
	}
	return f.Index(), nil
}

// promotionNudge is how long a promotion waits for its commit before the
// leader appends an entry after it (waitPromotion).
const promotionNudge = 500 * time.Millisecond

// RemoveServer removes node id from the group. Asked to remove itself,
// the leader hands its leadership off instead and answers ErrNotLeader,
// so that the caller asks the new leader: a leader that commits its own
// removal steps down without telling anyone, and the others wait out
// their heartbeat timeout, 30 s or more for queue groups, before they
// elect a new one. The chaos harness saw it, when a member's removal
// found a leader that had moved a moment before.
func (r *Replica) RemoveServer(id string) (index uint64, err error) {
	if !r.isLeader() {
		return 0, ErrNotLeader
	}
	if id == r.cfg.NodeID {
		r.settler.beforeTransfer()
		if err := errorFor(r.wait(r.raft.LeadershipTransfer())); err != nil {
			r.log.Debug("hand off before removing this member", "err", err)
		}
		return 0, ErrNotLeader
	}
	f := r.raft.RemoveServer(raft.ServerID(id), 0, 0)
	if err := errorFor(r.wait(f)); err != nil {
		return 0, err
	}
	return f.Index(), nil
}

// waitPromotion is wait for AddVoter's future. hashicorp/raft writes and
// replicates a configuration entry before it counts the new voters in its
// commitment (appendConfigurationEntry: dispatchLogs, then
// commitment.setConfiguration), so an acknowledgement of the entry from
// the promoted member that comes back in between is not counted, and
// later AppendEntries carry no entry to acknowledge again. When the
// promoted member's vote is needed for a majority (another member is
// down) the entry then commits only once another entry follows: never,
// on an idle queue (seen as a transport test hanging under CI's load). So
// while the promotion waits, a barrier entry follows it every
// promotionNudge (not waited for: it only has to be appended).
func (c *core) waitPromotion(f raft.Future) error {
	return c.waitNudging(context.Background(), f, promotionNudge, func() { c.raft.Barrier(promotionNudge) })
}

// TransferLeadership hands the group's leadership to member id at addr,
// which must be caught up enough to take it (raft's TimeoutNow). It
// returns once the transfer has completed or failed; this member must
// lead.
func (r *Replica) TransferLeadership(id, addr string) error {
	if !r.isLeader() {
		return ErrNotLeader
	}
	r.settler.beforeTransfer()
	return errorFor(r.wait(r.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))))
}

// MemberStatus is a member's own view of its group, for operators.
type MemberStatus struct {
	State        string // Leader, Follower, Candidate, Shutdown
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastLogIndex uint64
	// SnapshotIndex is the index of this member's latest snapshot: its
	// log holds no entry below it but those of live messages.
	SnapshotIndex uint64
	Voter         bool
}

// Status reports this member's view of the group.
func (r *Replica) Status() MemberStatus {
	st := MemberStatus{State: r.raft.State().String()}
	num := raftStats(r.raft)
	st.Term = num("term")
	st.CommitIndex = num("commit_index")
	st.AppliedIndex = num("applied_index")
	st.LastLogIndex = num("last_log_index")
	st.SnapshotIndex = num("last_snapshot_index")
	if f := r.raft.GetConfiguration(); f.Error() == nil {
		servers := f.Configuration().Servers
		if conf := r.fo.lateConf.Load(); len(servers) == 0 && conf != nil {
			// A new group's member that has not heard from the member
			// chosen to lead yet: the group's first configuration,
			// which it keeps (failover.go), is what it will have.
			servers = conf.Servers
		}
		for _, s := range servers {
			if s.ID == raft.ServerID(r.cfg.NodeID) {
				st.Voter = s.Suffrage == raft.Voter
			}
		}
	}
	return st
}

// raftStats reads ra's Stats once and returns a lookup of its numbers
// (zero for a missing or non-numeric key).
func raftStats(ra *raft.Raft) func(key string) uint64 {
	st := ra.Stats()
	return func(key string) uint64 {
		n, _ := strconv.ParseUint(st[key], 10, 64)
		return n
	}
}
