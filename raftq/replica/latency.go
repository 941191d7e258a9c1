package replica

import "time"

// CommitLatency is how long the last entry this member appended as leader
// took from its append to its apply here (a majority's write and the
// round trips between): RabbitMQ's rabbitmq_raft_entry_commit_latency_seconds.
// False if this member does not lead or has applied none of its own yet.
func (c *core) CommitLatency() (time.Duration, bool) {
	d := c.commitLatency.Load()
	return time.Duration(d), d > 0 && c.isLeader()
}
