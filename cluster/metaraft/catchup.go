package metaraft

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/metapb"
)

// CatchUp returns once this node's subscriber has been handed every
// change committed before the call (a read barrier: the leader's applied
// index after a barrier, then wait for it here). A node that misses a
// queue or exchange a client names calls it before answering "not
// found": the definition may have been committed through another node a
// moment ago.
func (s *Store) CatchUp(ctx context.Context) error {
	gaps := s.gaps.Load() // covered once this catch-up succeeds
	var index uint64
	err := s.onLeader(ctx, "catch up",
		func(ctx context.Context) error {
			var err error
			index, err = s.readIndexLocal(ctx)
			return err
		},
		func(ctx context.Context, c metapb.MetaClient) error {
			rep, err := c.ReadIndex(ctx, &metapb.ReadIndexRequest{})
			if err == nil {
				index = rep.Index
			}
			return err
		})
	if err != nil {
		return err
	}
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	// raft counts an entry applied once it has handed it to the FSM's
	// goroutine, before the FSM has applied it, and it applies barriers
	// and configuration changes without the FSM at all. So first wait
	// for raft to have applied as far, then find the last entry up to
	// there that the FSM takes in, then wait for the subscriber to have
	// been handed it. (Taking the FSM's index at that moment instead
	// returned before the FSM had applied what raft had just handed it:
	// a restarted node then saw its queues as deleted; removeOrphans.)
	var need uint64
	reached := false
	for {
		if !reached && s.raft.AppliedIndex() >= index {
			need = s.lastCommandAt(index)
			reached = true
		}
		if reached && s.deliveredIndex() >= need {
			s.caughtUp.Store(true)
			for c := s.caughtGap.Load(); c < gaps && !s.caughtGap.CompareAndSwap(c, gaps); c = s.caughtGap.Load() {
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("meta: catch up to %d: %w", index, ctx.Err())
		case <-t.C:
		}
	}
}

// readIndexLocal is the leader's applied index once everything committed
// before is applied.
func (s *Store) readIndexLocal(ctx context.Context) (uint64, error) {
	if err := wait(ctx, s.raft.Barrier(remaining(ctx, 5*time.Second))); err != nil {
		return 0, err
	}
	s.noticeCommit() // the caller waits for its copy to reach the barrier
	return s.raft.AppliedIndex(), nil
}

// lastCommandAt is the index of the last entry at or below index that
// raft hands the FSM (a command), or how far the FSM has applied if none
// is above that. An entry no longer in the log was compacted into a
// snapshot, which the FSM's state already includes.
func (s *Store) lastCommandAt(index uint64) uint64 {
	from := s.fsm.applied.Load()
	var l raft.Log
	for i := index; i > from; i-- {
		if err := s.logs.GetLog(i, &l); err != nil {
			break
		}
		if l.Type == raft.LogCommand {
			return i
		}
	}
	return from
}

// deliveredIndex is how far the subscriber has been handed changes (the
// applied state itself when nobody subscribed).
func (s *Store) deliveredIndex() uint64 {
	if sub := s.fsm.sub.Load(); sub != nil {
		return sub.delivered.Load()
	}
	return s.fsm.applied.Load()
}

func (sv *service) ReadIndex(ctx context.Context, _ *metapb.ReadIndexRequest) (*metapb.ReadIndexReply, error) {
	if !sv.s.IsLeader() {
		return nil, errNotLeader
	}
	index, err := sv.s.readIndexLocal(ctx)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, toStatus(err)
	}
	return &metapb.ReadIndexReply{Index: index}, nil
}

// staleAfter is how long a follower may go without hearing from the leader
// before its copy counts as possibly stale. A leader heartbeats each
// follower a tenth to a fifth of HeartbeatTimeout after the last
// contact, so a live leader stays well within it.
func (s *Store) staleAfter() time.Duration { return s.cfg.HeartbeatTimeout / 2 }

// CaughtUp reports whether a CatchUp has succeeded since the store opened.
func (s *Store) CaughtUp() bool { return s.caughtUp.Load() }

// MayBeStale reports whether this node's copy may lack a change committed
// through another node. Anywhere: raft has handed the FSM a command it
// has not applied yet, or the subscriber has not yet been handed
// everything applied (a restarted node's model opens the replicas of its
// queues one by one, for seconds, and routes meanwhile). On the leader:
// it has not applied everything committed. On a follower: it has not
// caught up once since it started (a restarted node holds what it had
// when it stopped until the leader tells it more) or since it last lost
// touch with the leader (watchContact), it holds entries whose
// commit it has not learnt yet, it knows no leader, or it has not heard
// from the leader lately (the leader may have stopped right after a
// commit that only the other followers hold; the next leader tells this
// node seconds later). Cheap: for a caller deciding whether a miss
// deserves a CatchUp.
//
// An entry moves on while this looks: stored, committed, handed to the
// FSM, applied, handed to the subscriber. The checks follow it in that
// order, so that one that moves on between two checks is caught by the
// next; in the other order an entry could pass from one stage to the
// next between the checks of both and be seen in neither (a queue
// declared through another node was then dropped as unroutable here, a
// CI failure of TestDeclaredThroughOneNodeRoutesFromEvery).
func (s *Store) MayBeStale() bool {
	if s.raft.State() == raft.Leader {
		if s.raft.AppliedIndex() < s.raft.CommitIndex() {
			return true
		}
	} else {
		if !s.caughtUp.Load() || s.caughtGap.Load() < s.gaps.Load() {
			return true
		}
		if _, addr := s.Leader(); addr == "" {
			return true
		}
		if time.Since(s.raft.LastContact()) > s.staleAfter() {
			return true
		}
		if s.unappliedChanges() {
			return true
		}
	}
	return s.handedUnapplied() || s.deliveredIndex() < s.fsm.applied.Load()
}

// handedUnapplied reports whether raft has handed the FSM a command that
// it has not applied yet: raft counts an entry applied once handed over,
// so unappliedChanges, which looks past raft's applied index, misses it
// (a queue declared through another node was unroutable here for that
// moment). Only the last few entries are looked at: barriers, which the
// FSM never sees, can pile up above its index, and any command handed
// over this moment is among the last.
func (s *Store) handedUnapplied() bool {
	applied := s.fsm.applied.Load()
	var l raft.Log
	for i, n := s.raft.AppliedIndex(), 0; i > applied && n < 16; i, n = i-1, n+1 {
		if err := s.logs.GetLog(i, &l); err != nil {
			return true
		}
		if l.Type == raft.LogCommand {
			return true
		}
	}
	return false
}

// unappliedChanges reports whether this follower holds a change (a
// command or a configuration) whose commit it has not learnt yet.
// Barriers do not count: the one after each commit (notice.go) and each
// CatchUp's own are learnt committed only a CommitTimeout later, and
// counting them would make every catch-up the cause of the next.
func (s *Store) unappliedChanges() bool {
	last := s.raft.LastIndex()
	from := s.raft.AppliedIndex() + 1
	if last >= from+8 {
		return true // more than a few: not worth reading them
	}
	for i := from; i <= last; i++ {
		var l raft.Log
		if err := s.logs.GetLog(i, &l); err != nil {
			return true
		}
		if l.Type != raft.LogBarrier && l.Type != raft.LogNoop {
			return true
		}
	}
	return false
}

// watchContact counts, until the store closes, each time this node goes
// without hearing from a leader for longer than staleAfter. A follower cut
// off by a partition hears the leader's heartbeat first when the link
// heals, and heartbeats carry no entries: its copy looked current (a
// leader, fresh contact, nothing unapplied) while it still lacked what was
// committed meanwhile, until the leader's replication, backing off from
// the failed calls, sent it. The chaos harness saw replies to a reply
// queue declared during such a partition returned as unroutable by the
// healed node and confirmed. A gap makes MayBeStale hold until a CatchUp,
// which asks the leader how far to go. The start's own gap (no contact
// yet) is caughtUp's business.
func (s *Store) watchContact() {
	defer close(s.contactDone)
	t := time.NewTicker(s.staleAfter() / 4)
	defer t.Stop()
	inGap := true
	for {
		select {
		case <-s.closed:
			return
		case <-t.C:
		}
		stale := s.raft.State() != raft.Leader && time.Since(s.raft.LastContact()) > s.staleAfter()
		if stale && !inGap {
			s.gaps.Add(1)
		}
		inGap = stale
	}
}
