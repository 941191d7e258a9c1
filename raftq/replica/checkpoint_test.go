package replica

import (
	"context"
	"testing"
	"time"

	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestCheckpointSnapshotsAndCompacts: far below the snapshot threshold, a
// queue has no snapshot; Checkpoint takes one covering every entry it
// applied, raft drops the log before it (but for the trailing entries
// and the live messages), and a restart restores the queue from it.
func TestCheckpointSnapshotsAndCompacts(t *testing.T) {
	eachStorage(t, testCheckpointSnapshotsAndCompacts)
}

func testCheckpointSnapshotsAndCompacts(t *testing.T, st storage) {
	dir := t.TempDir()
	node := st.node(t)
	r := openTest(t, node, dir, nil)
	enqueue(t, r, 3000)
	c := &fakeConsumer{}
	if err := r.Consume(c, queue.ConsumeOptions{Prefetch: 2000}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "2000 deliveries", func() bool { return len(c.ids()) == 2000 })
	r.Settle(c.ids())
	testwait.For(t, 5*time.Second, "1000 left", func() bool { st := r.Stats(); return st.Ready+st.Unacked == 1000 })
	r.Cancel(c)

	if got := r.Status().SnapshotIndex; got != 0 {
		t.Fatalf("snapshot index %d before the checkpoint, want none", got)
	}
	firstBefore, _ := r.storage.store.FirstIndex()
	applied := r.raft.AppliedIndex()
	idx, err := r.Checkpoint(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if idx < applied {
		t.Fatalf("checkpoint at %d, want at least the applied index %d", idx, applied)
	}
	if got := r.Status().SnapshotIndex; got != idx {
		t.Fatalf("status shows snapshot index %d, Checkpoint said %d", got, idx)
	}
	// Compaction keeps the live messages' entries (m2000 on) and the
	// trailing entries before the snapshot, and drops the rest.
	if first, _ := r.storage.store.FirstIndex(); first <= firstBefore {
		t.Fatalf("log starts at %d after the checkpoint, %d before: nothing compacted", first, firstBefore)
	}
	// Again: the leader's two barriers are the entries since.
	if again, err := r.Checkpoint(context.Background(), 0); err != nil || again != idx+2 {
		t.Fatalf("second checkpoint: %d %v, want %d", again, err, idx+2)
	}

	r.Close()
	node.restart(t)
	r = openTest(t, node, dir, nil)
	defer r.Close()
	testwait.For(t, 5*time.Second, "1000 ready after restart", func() bool { return r.Stats().Ready == 1000 })
	d, _, ok, err := r.Get(true)
	if err != nil || !ok {
		t.Fatalf("get after restart: ok %v err %v", ok, err)
	}
	// Prefetch 2000 took m0..m1999; the first left is m2000.
	if string(d.Message.Body) != "m2000" {
		t.Fatalf("first message after restart %q, want m2000", d.Message.Body)
	}
}
