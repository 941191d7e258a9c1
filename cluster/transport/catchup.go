package transport

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// catchUp gets followers that fell behind sent their entries again soon.
// raft retries a failed replication call only when an entry is appended
// or after CommitTimeout (tens of seconds for an idle queue group), so a
// follower whose node was restarting when it was tried would stay behind
// that long, though it answers heartbeats again within a second. The
// group is nudged (SetPipelineIdle's function) to append an entry, which
// makes raft send the next batch, when such a follower answers again and
// when a replication pipeline goes idle (pipeline.go's checkIdle).
type catchUp struct {
	// lagging are the followers a replication call failed to reach
	// since their last answered heartbeat.
	lagging sync.Map // raft.ServerAddress → struct{}
	// nudge is SetPipelineIdle's function, or nil.
	nudge atomic.Pointer[func(lastAcked uint64)]
}

// failed notes target as lagging: a replication call failed to reach it.
func (c *catchUp) failed(target raft.ServerAddress) { c.lagging.Store(target, struct{}{}) }

// answered is a heartbeat's success: a follower noted lagging is
// reachable again, and the group is asked to append an entry so that
// raft retries its replication now.
func (c *catchUp) answered(target raft.ServerAddress) {
	if _, lagging := c.lagging.LoadAndDelete(target); !lagging {
		return
	}
	if fn := c.nudge.Load(); fn != nil {
		go (*fn)(0)
	}
}
