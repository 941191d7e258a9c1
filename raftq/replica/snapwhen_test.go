package replica

import (
	"sync"
	"testing"
	"time"
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
	waitFor(t, "a snapshot", func() bool { return r.Status().SnapshotIndex > 0 })
	if took := time.Since(opened); took >= interval {
		t.Fatalf("first snapshot %v after opening: raft's own check (every %v or more), not the threshold", took, interval)
	}
}

// Publishing faster than the log takes entries fills raft's apply
// channel, and an enqueue then blocks in raft.Apply holding the lock that
// orders proposals. The state machine confirming earlier publishes
// meanwhile must not need that lock: raft's leader loop empties the
// apply channel only while the state machine takes what it commits.
func TestEnqueueBurstBeyondApplyChannel(t *testing.T) {
	r := openTest(t, nil, t.TempDir(), nil)
	defer r.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				enqueue(t, r, 8000)
			}()
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("enqueues still unanswered after 2 minutes: deadlocked")
	}
}
