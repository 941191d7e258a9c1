package replica

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq/testwait"
)

// A busy queue snapshots once the entries since its last snapshot reach
// the threshold, without waiting for raft's own check (every two to four
// minutes): its log is then cut, and the node's log segments spent, a
// little at a time.
func TestSnapshotOnceThresholdPassed(t *testing.T) {
	opened := time.Now()
	r := openTest(t, nil, t.TempDir(), nil)
	defer r.Close()
	interval := r.raft.ReloadableConfig().SnapshotInterval
	enqueue(t, r, minSnapshotThreshold+500)
	testwait.For(t, 5*time.Second, "a snapshot", func() bool { return r.Status().SnapshotIndex > 0 })
	if took := time.Since(opened); took >= interval {
		t.Fatalf("first snapshot %v after opening: raft's own check (every %v or more), not the threshold", took, interval)
	}
}
