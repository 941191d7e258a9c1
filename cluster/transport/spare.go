package transport

import (
	"cmp"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Spare followers. A leader commits an entry once a majority of voters
// hold it: in a group of three, itself and one follower. The other
// follower's copy is not waited for, yet at a low rate it cost as much as
// the one that was: its own AppendEntries, log write, fdatasync and
// answer for every entry, about a quarter of the cluster's CPU per
// message at 1,000 msg/s (docs/performance.md).
//
// With a spare delay set, the leader sends entries to the followers its
// commits need (the eager ones) at once, and to the others (the spares)
// at most one AppendEntries per delay: entries appended meanwhile go
// together in the next request, and the spare writes and syncs them once.
// Nothing waits on a spare unless an eager follower stops answering, and
// then only until the spare's next request: an eager follower with a
// request unanswered for longer than eagerPatience no longer counts as
// eager, and the next follower in line takes its place.
//
// Raft's safety does not depend on when a follower is sent entries, only
// on a follower acknowledging what it has stored, so a spare changes no
// guarantee: a commit still needs a majority's synced copies.

// spareBatch is the entry count from which a request goes at once to any
// follower: one that far behind is catching up (raft sends up to
// MaxAppendEntries at a time), and holding each of its batches back would
// slow that down for nothing.
const spareBatch = 32

// SetSpareDelay makes this group's leader hold AppendEntries to the
// followers its commits do not need so that at most one goes to each per
// d (see above); zero, the default, sends every request at once. The
// group's raft must be known (JudgeVotesOf): it gives the voters.
func (t *Transport) SetSpareDelay(d time.Duration) { t.spares.delay.Store(int64(d)) }

// spareChooser decides which of a group's followers are spares, from the
// group's voters (its judge's configuration) and how its replication
// pipelines are answered.
type spareChooser struct {
	group string
	self  raft.ServerAddress
	judge *atomic.Pointer[raft.Raft] // the Transport's (votes.go)
	delay atomic.Int64               // SetSpareDelay's
	// pipes are the open replication pipelines by follower address
	// (raft.ServerAddress → *pipeline), whose answers tell which
	// followers are keeping up.
	pipes sync.Map
}

// eagerPatience is how long an eager follower may leave a request
// unanswered before the spares stop waiting for it: twice the delay, and
// at least spareMinPatience, so that one slow sync on a loaded machine
// does not make every spare eager.
func eagerPatience(delay time.Duration) time.Duration {
	return max(2*delay, spareMinPatience)
}

const spareMinPatience = 20 * time.Millisecond

// wait is how long p's request args should wait before it is sent:
// zero unless the delay is set, args carries a few entries, p's follower
// is a spare, and the last request to it went less than the delay ago.
func (c *spareChooser) wait(p *pipeline, args *raft.AppendEntriesRequest, now time.Time) time.Duration {
	delay := time.Duration(c.delay.Load())
	if delay <= 0 || len(args.Entries) == 0 || len(args.Entries) >= spareBatch {
		return 0
	}
	wait := p.lastSend.Add(delay).Sub(now)
	if wait <= 0 || !c.isSpare(p.target, delay, now) {
		return 0
	}
	return wait
}

// isSpare reports whether target is a follower the group's commits can
// do without: a non-voter, or a voter outside the first healthy voters in
// the group's order (spareRank) that a majority needs besides the leader.
// With too few healthy voters nobody is spare.
func (c *spareChooser) isSpare(target raft.ServerAddress, delay time.Duration, now time.Time) bool {
	r := c.judge.Load()
	if r == nil {
		return false
	}
	future := r.GetConfiguration()
	if future.Error() != nil {
		return false
	}
	servers := future.Configuration().Servers
	self := c.self
	voters := 0
	var followers []raft.ServerAddress
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.Address != self {
			followers = append(followers, s.Address)
		}
	}
	if !slices.Contains(followers, target) {
		return true // a non-voter: no commit waits for it
	}
	need := voters / 2 // followers a majority needs besides the leader
	if len(followers) <= need {
		return false
	}
	// The first need healthy followers in rank order are eager; target is
	// spare if it is not among them.
	slices.SortFunc(followers, func(a, b raft.ServerAddress) int {
		return cmp.Compare(spareRank(c.group, a), spareRank(c.group, b))
	})
	patience := eagerPatience(delay)
	eager := 0
	for _, a := range followers {
		if eager == need {
			break
		}
		if !c.answering(a, patience, now) {
			continue
		}
		if a == target {
			return false
		}
		eager++
	}
	return eager == need
}

// spareRank orders a group's followers for the choice of eager ones: a
// hash of group and address, so that the groups a node leads spread their
// eager followers (and with them the syncs) over the other nodes instead
// of all choosing the same one.
func spareRank(group string, a raft.ServerAddress) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(a))
	return h.Sum32()
}

// answering reports whether target's replication pipeline has answered
// everything sent to it, or has been waiting for an answer less than
// patience. A follower without a pipeline (raft sends it one request at a
// time after a failure, or has not started) is not counted on.
func (c *spareChooser) answering(target raft.ServerAddress, patience time.Duration, now time.Time) bool {
	v, ok := c.pipes.Load(target)
	if !ok {
		return false
	}
	p := v.(*pipeline)
	if p.ctx.Err() != nil {
		return false
	}
	return p.pending.Load() == 0 || now.Sub(time.Unix(0, p.waitingSince.Load())) < patience
}
