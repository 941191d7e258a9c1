package metaraft

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
// not, the leader follows a commit with a barrier: the barrier's
// AppendEntries carries the new commit index at once, and the barrier's
// own commit, which nobody waits for, goes out at the next
// CommitTimeout. In a stream of commits (a client declaring a thousand
// queues one after another) the next entry carries the commit index as
// well as a barrier would, so a barrier waits noticeDelay for one and
// is left out if it came: every commit is then learnt within about
// noticeDelay plus a round trip, and the stream's log is not doubled.

const (
	// noticeDelay is how long a commit waits for a later entry to carry
	// its index before a barrier does.
	noticeDelay = 5 * time.Millisecond
	// noticeBarrierTimeout bounds one barrier's wait for the log.
	noticeBarrierTimeout = 5 * time.Second
)

// noticeCommit asks for a barrier after a commit applied on the leader.
// It never blocks.
func (s *Store) noticeCommit() {
	select {
	case s.notice <- struct{}{}:
	default: // one is pending, and it will carry this commit too
	}
}

// runNotices appends a barrier after noticed commits that no later entry
// followed, on the leader, until the store closes.
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
		// Everything applied here has committed, and followers must
		// learn of it. An entry appended from now on goes out with a
		// commit index at least as high (and notices its own commit);
		// one appended before may have gone out before the commit.
		last := s.raft.LastIndex()
		select {
		case <-s.closed:
			return
		case <-time.After(noticeDelay):
		}
		if s.raft.LastIndex() > last {
			continue
		}
		// Waiting for the barrier keeps one in flight at a time: commits
		// meanwhile leave one notice, answered after it. Not past Close:
		// a barrier that cannot commit (the last node of a cluster
		// stopping) may never be answered, even once raft has shut down
		// (hashicorp/raft#498), and Close waits for this loop.
		f := s.raft.Barrier(noticeBarrierTimeout)
		done := make(chan error, 1)
		go func() { done <- f.Error() }()
		select {
		case err := <-done:
			if err != nil {
				s.log.Debug("barrier after a commit", "err", err)
			}
		case <-s.closed:
			return
		}
	}
}
