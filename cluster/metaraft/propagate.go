package metaraft

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// A commit needs a majority, so when a client hears declare-ok the third
// node of three may not hold the entry yet: a publish through it a moment
// later found no queue and, holding nothing it had not applied, no reason
// to catch up (MayBeStale), and was dropped as unroutable. Measured: one
// publish in seven made through another node right after the declaration.
// RabbitMQ's old metadata store (Mnesia) wrote to every node before
// answering. So the leader, after a commit, waits for every follower that
// answers to hold the entry: that costs about one more answer, as the
// entry went to every follower at once. Holding it, a follower that has
// not learnt of its commit yet reports MayBeStale, and a miss catches up.
// A follower that is down or cut off is not waited for: one that has not
// answered within ten heartbeat timeouts, and none for longer than
// propagateWait, after which it is not waited for again until it has
// caught up.

// ackTracker is a transport that records followers' acknowledgements
// (cluster/transport's).
type ackTracker interface {
	TrackAcks()
	Acked(target raft.ServerAddress) (index uint64, at time.Time)
}

// propagateWait bounds the wait for followers after one commit.
const propagateWait = 500 * time.Millisecond

// answeredWithin, in heartbeat timeouts, is how recently a follower must
// have answered to be waited for: generous, as a follower that is slow
// to answer heartbeats (a loaded machine) may well be receiving entries,
// and one that is gone costs one propagateWait before lag leaves it out.
const answeredWithin = 10

// propagatePoll is how often the wait looks again.
const propagatePoll = 200 * time.Microsecond

// awaitFollowers returns once every other member of the group that has
// answered lately holds the entry at index, or after
// propagateWait, or when ctx ends. This node leads.
func (s *Store) awaitFollowers(ctx context.Context, index uint64) {
	t, ok := s.cfg.Transport.(ackTracker)
	if !ok {
		return
	}
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	deadline := time.Now().Add(propagateWait)
	for _, srv := range f.Configuration().Servers {
		if srv.ID == raft.ServerID(s.cfg.NodeID) {
			continue
		}
		for {
			// One that never answered this leader may have just joined:
			// it is waited for, once (lag).
			acked, at := t.Acked(srv.Address)
			if acked >= index || (!at.IsZero() && time.Since(at) > answeredWithin*s.cfg.HeartbeatTimeout) || s.lagging(srv.Address, acked) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				// Not waited for again until it holds this entry: a
				// node stopping answers heartbeats for a while, and
				// every commit meanwhile would wait the whole time.
				s.lagMu.Lock()
				s.lag[srv.Address] = index
				s.lagMu.Unlock()
				// Until it holds the entry, that node may route as if
				// the change had not happened (MayBeStale cannot tell).
				s.log.Info("metadata follower has not acknowledged a commit; answering without it",
					"follower", srv.ID, "index", index, "acknowledged", acked, "limit", propagateWait)
				return
			}
			time.Sleep(propagatePoll)
		}
	}
}

// lagging reports whether target missed an earlier wait and has not
// caught up with it since (its acknowledged index is acked).
func (s *Store) lagging(target raft.ServerAddress, acked uint64) bool {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	missed, ok := s.lag[target]
	if ok && acked >= missed {
		delete(s.lag, target)
		return false
	}
	return ok
}
