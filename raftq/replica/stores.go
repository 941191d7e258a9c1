package replica

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/queue"
)

// stores are a member's storage: the group's log and stable store (its
// group in the node's write-ahead log, or a log of its own), the snapshot
// store, and the payloads of recent messages kept at hand for delivery. It
// also starts the snapshots the watcher finds due and the checkpoints an
// operator asks for.
type stores struct {
	core *core

	store raftStore
	// closeStore closes store's write-ahead log if it is the queue's
	// own; the node's stays open.
	closeStore func() error
	snaps      *bodyStore
	recent     recentMessages
	snapping   atomic.Bool // a snapshot snapshotWhenDue started runs
	// checkpoints counts the Checkpoint calls under way.
	checkpoints atomic.Int32
}

// close gives the payloads back to the node's cache and closes the store.
func (s *stores) close() {
	s.recent.clear() // back to the node's payload cache
	if err := s.closeStore(); err != nil {
		s.core.log.Warn("close raft log", "err", err)
	}
}

// readMessage reads a message's body and properties back from its
// enqueue entry: from the recent-message cache when it is delivered soon
// after it arrived (the usual case), else from the log.
func (s *stores) readMessage(index uint64) (*queue.Message, error) {
	if m := s.recent.take(index); m != nil {
		return m, nil
	}
	var l raft.Log
	if err := s.store.GetLog(index, &l); err != nil {
		return nil, fmt.Errorf("log entry %d: %w", index, err)
	}
	m, err := decodeEntryMessage(l.Data)
	if err != nil {
		return nil, fmt.Errorf("log entry %d: %w", index, err)
	}
	return m, nil
}

// snapshotWhenDue starts a snapshot once the entries applied since the
// last one reach the snapshot threshold, without waiting for raft's own
// check (every SnapshotInterval, which is long: a thousand idle groups
// each waking often would add up). On a busy queue the log is then
// compacted every few tens of thousands of entries, so its space comes
// back segment by segment, in files the node's log recycles, instead of
// hundreds of megabytes at a time into new files.
func (s *stores) snapshotWhenDue(sinceSnap uint64) {
	if sinceSnap < s.core.raft.ReloadableConfig().SnapshotThreshold || !s.snapping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.snapping.Store(false)
		err := s.core.raft.Snapshot().Error()
		if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrRaftShutdown) {
			s.core.log.Debug("snapshot", "err", err)
		}
	}()
}
