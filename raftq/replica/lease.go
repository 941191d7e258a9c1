package replica

import "github.com/warrenmq/warren/raftq"

// Touch renews the queue's x-expires lease: the broker calls it when the
// queue is redeclared (the TTL guide: redeclaring renews the lease). It
// returns once the renewal is committed.
func (r *Replica) Touch() error {
	return errorFor(r.wait(r.propose(&raftq.Command{Op: raftq.OpTouch})))
}

// onLeading runs once the replica leads and has applied its log: it
// resumes what the machine says is unfinished, the at-least-once dead
// letters and an x-expires deletion requested before a restart.
func (r *Replica) onLeading() {
	r.dl.start()
	r.fsm.mu.Lock()
	deleting := r.fsm.m.DeleteRequested()
	r.fsm.mu.Unlock()
	if deleting && r.cfg.OnExpired != nil {
		go r.cfg.OnExpired()
	}
}

// queueConfig is the configuration the queue's machine runs with.
func (r *Replica) queueConfig() raftq.Config {
	r.fsm.mu.Lock()
	defer r.fsm.mu.Unlock()
	return r.fsm.m.Config()
}
