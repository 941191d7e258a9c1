package replica

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// maxCheckpointCatchUp bounds how long Checkpoint waits for the member to
// apply what it is to cover before it snapshots what it has applied.
const maxCheckpointCatchUp = time.Second

// checkpoint is Checkpoint.
func (s *stores) checkpoint(ctx context.Context, appliedThrough uint64) (uint64, error) {
	s.checkpoints.Add(1)
	defer s.checkpoints.Add(-1)
	target := s.core.raft.LastIndex()
	if appliedThrough > 0 {
		target = min(target, appliedThrough)
	}
	if s.core.isLeader() {
		// Two barriers: the second's AppendEntries tells the followers
		// the first is committed. They must apply an entry after the
		// latest configuration change: raft refuses a snapshot until the
		// FSM has, and an FSM that does not store configurations is not
		// told of them (after add member, say, the followers' FSM index
		// stays before it until the next entry of another kind).
		var err error
		for range 2 {
			if err = s.core.wait(s.core.raft.Barrier(maxCheckpointCatchUp)); err != nil {
				break
			}
		}
		if err == nil {
			target = 0 // applied through the barriers
		} else if !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipLost) {
			return 0, err
		}
	}
	wait, cancel := context.WithTimeout(ctx, maxCheckpointCatchUp)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
catchUp:
	for s.core.raft.AppliedIndex() < target {
		select {
		case <-tick.C:
		case <-s.core.done:
			return 0, raft.ErrRaftShutdown
		case <-wait.Done():
			break catchUp // snapshot what it has applied
		}
	}
	for {
		err := s.core.wait(s.core.raft.Snapshot())
		if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return 0, err
		}
		snap := raftStats(s.core.raft)("last_snapshot_index")
		if err == nil || snap >= s.core.raft.AppliedIndex() {
			return snap, nil
		}
		// Nothing new to the FSM goroutine, though raft counts entries
		// applied since the last snapshot: it hands the FSM a batch
		// before the FSM has applied it, and takes a snapshot request
		// as readily as a batch. The batch is on its way.
		select {
		case <-tick.C:
		case <-s.core.done:
			return 0, raft.ErrRaftShutdown
		case <-ctx.Done():
			return snap, nil
		}
	}
}

// checkpointing is Checkpointing.
func (s *stores) checkpointing() bool { return s.checkpoints.Load() > 0 }

// Checkpoint snapshots this member's state now, as rabbitmq-queues
// force_checkpoint asks of every member of a queue: raft then compacts
// the log behind the snapshot (but for its trailing entries and those of
// live messages), so a restart replays less and the node's write-ahead
// log can recycle segments sooner. Snapshots are otherwise taken only
// every few tens of thousands of entries (snapshotWhenDue).
//
// A leader first appends two barriers, which return once it has applied
// everything before them, and the second's AppendEntries tells the
// followers the commit index that covers the first: a follower learns of
// commits only with the next entry or every CommitTimeout (long), so on
// an idle queue it may not have applied what it stores. A follower waits,
// a second at most or until ctx ends, until it has applied appliedThrough
// (the leader's first barrier), or its whole log as it is if that is 0,
// then snapshots what it has applied.
//
// It returns the index of the member's latest snapshot afterwards; a
// member with nothing new since its last snapshot keeps that one.
func (r *Replica) Checkpoint(ctx context.Context, appliedThrough uint64) (uint64, error) {
	return r.storage.checkpoint(ctx, appliedThrough)
}

// Checkpointing reports whether a Checkpoint is under way: the group
// should not hibernate meanwhile (closing the replica would fail it).
func (r *Replica) Checkpointing() bool { return r.storage.checkpointing() }
