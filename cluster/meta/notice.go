package meta

import (
	"time"

	"github.com/hashicorp/raft"
)

// Followers learn that an entry committed only from the leader's next
// AppendEntries, and raft sends one when there are new entries to carry
// or, failing that, every CommitTimeout. Until then a follower has the
// entry but does not apply it: a queue declared through one node is
// unknown on the others. Rather than a short CommitTimeout, which sends
// every follower an AppendEntries many times a second for ever, idle or
// not, the leader follows each commit with a barrier: the barrier's
// AppendEntries carries the new commit index at once, and the barrier's
// own commit, which nobody waits for, goes out at the next
// CommitTimeout. A burst of commits shares one barrier.

// noticeBarrierTimeout bounds one barrier's wait for the log.
const noticeBarrierTimeout = 5 * time.Second

// noticeCommit asks for a barrier after a commit. It never blocks.
func (s *Store) noticeCommit() {
	select {
	case s.notice <- struct{}{}:
	default: // one is pending, and it will carry this commit too
	}
}

// runNotices appends a barrier for every noticed commit (or burst of
// them), on the leader, until the store closes.
func (s *Store) runNotices() {
	defer close(s.noticesDone)
	for {
		select {
		case <-s.closed:
			return
		case <-s.notice:
		}
		if s.raft.State() != raft.Leader {
			continue
		}
		// Waiting for the barrier keeps one in flight at a time: commits
		// meanwhile leave one notice, answered by one more barrier.
		if err := s.raft.Barrier(noticeBarrierTimeout).Error(); err != nil {
			s.log.Debug("barrier after a commit", "err", err)
		}
	}
}
