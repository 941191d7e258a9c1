package replica

import (
	"testing"
	"time"
)

// A busy queue snapshots once the entries since its last snapshot reach
// the threshold, without waiting for raft's own check (every 10-20 s): its
// log is then cut, and the node's log segments spent, a little at a time.
func TestSnapshotOnceThresholdPassed(t *testing.T) {
	opened := time.Now()
	r := openTest(t, nil, t.TempDir(), nil)
	defer r.Close()
	enqueue(t, r, minSnapshotThreshold+500)
	if time.Since(opened) > 7*time.Second {
		// raft's own check may have come by now: nothing to tell apart.
		t.Skipf("enqueueing took %v", time.Since(opened))
	}
	waitFor(t, "a snapshot", func() bool { return r.Status().SnapshotIndex > 0 })
	if took := time.Since(opened); took >= 10*time.Second {
		t.Fatalf("first snapshot %v after opening: raft's own check, not the threshold", took)
	}
}
