package transport

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A group that asks (TrackAcks) learns, for each follower, the highest
// log index the follower acknowledged holding and when it last answered.
// The metadata group's leader waits with it, after a commit, for every
// follower that answers to hold the entry (meta's awaitFollowers): a
// queue declared through one node is then known to every node, committed
// or about to be learnt so, by the time the client hears declare-ok, and
// a publish through another node finds it.

// ackState is one follower's acknowledgements.
type ackState struct {
	index atomic.Uint64 // highest entry index acknowledged
	at    atomic.Int64  // Unix nanoseconds of the last successful answer
}

// ackTracker is a group's record of its followers' acknowledgements.
type ackTracker struct {
	tracking atomic.Bool
	acks     sync.Map // raft.ServerAddress → *ackState
}

// TrackAcks starts recording followers' acknowledgements (Acked).
func (t *Transport) TrackAcks() { t.acks.tracking.Store(true) }

// Acked is what target acknowledged last: the highest log index it holds
// as far as this node knows, and when it last answered an AppendEntries
// (zero time if never, or if acknowledgements are not tracked).
func (t *Transport) Acked(target raft.ServerAddress) (uint64, time.Time) {
	return t.acks.last(target)
}

func (a *ackTracker) last(target raft.ServerAddress) (uint64, time.Time) {
	v, ok := a.acks.Load(target)
	if !ok {
		return 0, time.Time{}
	}
	s := v.(*ackState)
	return s.index.Load(), time.Unix(0, s.at.Load())
}

// record notes a successful answer of target to args.
func (a *ackTracker) record(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if !a.tracking.Load() || resp == nil || !resp.Success {
		return
	}
	v, ok := a.acks.Load(target)
	if !ok {
		v, _ = a.acks.LoadOrStore(target, &ackState{})
	}
	s := v.(*ackState)
	if n := len(args.Entries); n > 0 {
		last := args.Entries[n-1].Index
		for {
			cur := s.index.Load()
			if cur >= last || s.index.CompareAndSwap(cur, last) {
				break
			}
		}
	}
	s.at.Store(time.Now().UnixNano())
}
