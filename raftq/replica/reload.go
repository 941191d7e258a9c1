package replica

import "time"

// raft's reloadable configuration is read, changed and written back
// whole (ReloadableConfig, ReloadConfig), so every change to it is made
// here, under failover.mu: the heartbeat and election timeouts
// (failover.go, drain.go) and the snapshot threshold the watcher adapts.

// setTimeouts sets the heartbeat and election timeouts to d.
func (fo *failover) setTimeouts(d time.Duration) {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	cur := fo.core.raft.ReloadableConfig()
	cur.HeartbeatTimeout, cur.ElectionTimeout = d, d
	if err := fo.core.raft.ReloadConfig(cur); err != nil {
		fo.core.log.Warn("set raft timeouts", "timeout", d, "err", err)
	}
}

// restoreTimeouts puts the configured timeouts back.
func (fo *failover) restoreTimeouts() {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	cur := fo.core.raft.ReloadableConfig()
	cur.HeartbeatTimeout, cur.ElectionTimeout = fo.base.HeartbeatTimeout, fo.base.ElectionTimeout
	if fo.raised { // drained (drain.go)
		cur.HeartbeatTimeout, cur.ElectionTimeout = drainedTimeout, drainedTimeout
	}
	if err := fo.core.raft.ReloadConfig(cur); err != nil {
		fo.core.log.Warn("restore raft timeouts", "err", err)
	}
}

// adaptSnapshotThreshold keeps the entries between two snapshots at least
// twice the messages a snapshot holds. A snapshot writes the whole state,
// so with a fixed threshold a large backlog would be rewritten again and
// again; this way each entry pays a bounded share of snapshot work, and
// the cost of snapshots follows the traffic, not the backlog times their
// number. Every member adapts on its own: snapshots are local.
func (fo *failover) adaptSnapshotThreshold(live int) {
	fo.mu.Lock() // failover.go changes the timeouts meanwhile
	defer fo.mu.Unlock()
	cur := fo.core.raft.ReloadableConfig()
	want, change := snapshotThreshold(cur.SnapshotThreshold, live)
	if !change {
		return
	}
	cur.SnapshotThreshold = want
	if err := fo.core.raft.ReloadConfig(cur); err != nil {
		fo.core.log.Warn("adjust snapshot threshold", "threshold", want, "err", err)
	}
}

// snapshotThreshold is the threshold for a machine holding live messages
// when it is cur now, and whether it is worth changing: not within a
// factor of two.
func snapshotThreshold(cur uint64, live int) (uint64, bool) {
	want := uint64(max(minSnapshotThreshold, 2*live))
	return want, want >= 2*cur || 2*want <= cur
}

// minSnapshotThreshold is the fewest entries between snapshots.
const minSnapshotThreshold = 16384
