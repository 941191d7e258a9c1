package replica

import (
	"time"

	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq"
)

// Touch renews the queue's x-expires lease: the broker calls it when the
// queue is redeclared (the TTL guide: redeclaring renews the lease). It
// returns once the renewal is committed.
func (r *Replica) Touch() error {
	return errorFor(r.wait(r.propose(&raftq.Command{Op: raftq.OpTouch})))
}

// onLeading runs once the replica leads and has applied its log: it
// resumes what the machine says is unfinished, the at-least-once dead
// letters and an x-expires deletion requested before a restart, and
// returns the messages of consumers that were attached through an earlier
// leader.
func (r *Replica) onLeading() {
	r.dlOnce.Do(r.dl.start)
	r.dl.signal()
	r.fsm.mu.Lock()
	deleting := r.fsm.m.DeleteRequested()
	r.fsm.mu.Unlock()
	if deleting && r.cfg.OnExpired != nil {
		go r.cfg.OnExpired()
	}
	r.reapConsumers()
}

// onFollowing runs when the replica stops leading. Publishes waiting for
// their commit are answered ErrNotLeader (forwarders send them to the new
// leader, which stores each once), and every consumer attached here is
// dropped: movable ones attach again to the new leader, which hands out
// the messages they held once more, marked redelivered.
func (r *Replica) onFollowing() {
	r.failPending(ErrNotLeader)
	r.mu.Lock()
	consumers := r.consumers
	r.consumers = make(map[raftq.ConsumerID]*consumerRef)
	r.byHandle = make(map[queue.Consumer]raftq.ConsumerID)
	r.handouts.Clear()
	r.toSettle = make(map[raftq.ConsumerID][]uint64)
	r.mu.Unlock()
	for _, ref := range consumers {
		if m, ok := ref.c.(queue.Movable); ok {
			go m.LeaderLost()
		} else {
			go ref.c.Gone()
		}
	}
}

// watchLeadership follows this member's leadership changes: a new leader
// first applies everything committed before it (a barrier), so that what
// it resumes reflects the whole log.
func (r *Replica) watchLeadership() {
	defer r.wg.Done()
	leading := r.isLeader() && r.cfg.Transport == nil // onLeading ran in Open
	ch := r.raft.LeaderCh()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-ch:
		case <-check.C:
			// LeaderCh keeps only the latest change; look anyway.
		}
		now := r.isLeader()
		switch {
		case now && !leading:
			if err := r.wait(r.raft.Barrier(10 * time.Second)); err != nil {
				r.log.Debug("barrier after election", "err", err)
				continue // lost it again, or shutting down: look later
			}
			leading = true
			r.log.Debug("leading")
			r.onLeading()
		case !now && leading:
			leading = false
			if r.stopped.Load() {
				// Closed or deleted, not deposed: consumers hear Gone
				// (delete) or nothing (node shutdown), not LeaderLost.
				return
			}
			r.log.Debug("stopped leading", "leader", r.Leader())
			r.onFollowing()
		}
	}
}

// queueConfig is the configuration the queue's machine runs with.
func (r *Replica) queueConfig() raftq.Config {
	r.fsm.mu.Lock()
	defer r.fsm.mu.Unlock()
	return r.fsm.m.Config()
}

// HandOff gives the group's leadership to another member (raft picks the
// most up-to-date one), before this node stops.
func (r *Replica) HandOff() error {
	if !r.isLeader() {
		return nil
	}
	return errorFor(r.wait(r.raft.LeadershipTransfer()))
}
