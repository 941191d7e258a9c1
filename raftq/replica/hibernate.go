package replica

// MayHibernate reports whether this member leads a group that could close
// on every member until it is needed again (cluster/node's hibernate.go):
// the queue holds nothing (no message ready, checked out or awaiting
// dead-letter confirmation), nobody consumes from it, nothing this member
// proposed awaits its commit, the machine has no deadline ahead (an
// x-expires queue has one), and every member of the configuration votes
// (no membership change half done). A closed group runs no goroutine and
// no timer, so anything that must happen later by itself rules it out.
func (r *Replica) MayHibernate() bool {
	if r.stopped.Load() || !r.isLeader() || !r.leaderApplied.Load() || r.storage.checkpointing() {
		return false
	}
	r.fsm.mu.Lock()
	st := r.fsm.m.Stats()
	_, deadline := r.fsm.m.NextDeadline()
	r.fsm.mu.Unlock()
	if st.Ready+st.Unacked+st.DeadLettered+st.Consumers > 0 || deadline {
		return false
	}
	pending := r.pub.waiting()
	consumers := r.consumers.busy()
	if pending+consumers > 0 {
		return false
	}
	servers, err := r.Servers()
	if err != nil || len(servers) == 0 {
		return false
	}
	for _, voter := range servers {
		if !voter {
			return false
		}
	}
	return true
}

// ResumeFollowers has a leading member append a barrier, whose AppendEntries
// reaches every follower: a follower that closed for a hibernation its
// leader then gave up opens again on it (cluster/node's hibernate.go).
func (r *Replica) ResumeFollowers() {
	if r.cfg.Transport != nil && !r.stopped.Load() {
		r.watch.wake(&r.watch.wantBarrier)
	}
}
