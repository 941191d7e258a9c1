package replica

import (
	"github.com/warrenmq/warren/raftq/queue"
)

// onLeading runs once the replica leads and has applied its log: it
// resumes what the machine says is unfinished, the at-least-once dead
// letters and an x-expires deletion requested before a restart, and
// returns the messages of consumers that were attached through an earlier
// leader.
func (w *watcher) onLeading() {
	w.r.storage.recent.start()
	w.r.dl.start()
	w.r.dl.resendPendingSoon()
	w.r.fsm.mu.Lock()
	deleting := w.r.fsm.m.DeleteRequested()
	w.r.fsm.mu.Unlock()
	if deleting {
		w.r.expire()
	}
	w.r.consumers.reap()
	w.r.upgrade.run()
}

// onFollowing runs when the replica stops leading. Publishes waiting for
// their commit are answered ErrNotLeader (forwarders send them to the new
// leader, which stores each once), and every consumer attached here is
// dropped: movable ones attach again to the new leader, under the same
// IDs, keeping the messages they hold (former.go). The settlements in
// hand go to the new leader.
func (w *watcher) onFollowing() {
	w.r.consumers.orphansDetached.Store(false)
	w.r.upgrade.stopLeading()
	w.r.storage.recent.clear() // only a leader delivers
	w.r.pub.failPending(ErrNotLeader)
	consumers, left := w.r.consumers.dropAll()
	w.r.settler.atLeader(acksOf(left)) // they name consumer and message already
	for _, ref := range consumers {
		if m, ok := ref.c.(queue.Movable); ok {
			go m.LeaderLost()
		} else {
			go ref.c.Gone()
		}
	}
}
