package replica

import (
	"sync"

	"github.com/hashicorp/raft"
)

// liveLogStore wraps the group's log store so that compaction keeps the
// entries of messages still in the queue: their bodies live nowhere else.
// raft asks to delete everything up to the snapshot; this store deletes
// the stretches between live messages instead, leaving a sparse log. raft
// trusts FirstIndex afterwards, and a follower needing a deleted entry is
// sent a snapshot, as the design notes describe.
//
// It must not implement raft.MonotonicLogStore: raft would then delete
// every old entry after a restore.
type liveLogStore struct {
	raft.LogStore
	// live lists the live message indexes in [min, max], ascending.
	live func(min, max uint64) []uint64

	mu sync.Mutex // serialises DeleteRange with itself
}

func (s *liveLogStore) DeleteRange(min, max uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := min
	for _, keep := range s.live(min, max) {
		if keep > from {
			if err := s.LogStore.DeleteRange(from, keep-1); err != nil {
				return err
			}
		}
		from = keep + 1
	}
	if from <= max {
		return s.LogStore.DeleteRange(from, max)
	}
	return nil
}
