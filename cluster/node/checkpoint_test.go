package node_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestForceCheckpoint: on three real nodes, a forced checkpoint while a
// queue takes publishes with confirms and a consumer acks snapshots every
// member of it at or past what each had applied when asked, and every
// member of a hibernating queue, which wakes for it; no confirmed message
// is lost or delivered twice, and a member restarted afterwards still has
// its snapshot. A bad pattern is refused.
func TestForceCheckpoint(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3, hibernateAfter(500*time.Millisecond))
	c := adminClient(t, ms[0])

	// The idle queue's log holds a few entries, then it sleeps.
	ch := ms[0].Channel()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("idle", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"a", "b", "c"} {
		publishConfirmed(t, ch, "idle", b)
	}
	if _, err := ch.QueuePurge("idle", false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the idle queue asleep", func() bool {
		open, asleep := groups(ms)
		return open == 0 && asleep == 3
	})

	if _, err := ch.QueueDeclare("orders", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	tr := startPublisher(t, ms[1], "orders")
	tr.consume(ms[2], "orders")
	tr.progress(200)

	before, err := c.QuorumStatus(callCtx(t, 5*time.Second), &adminpb.QuorumStatusRequest{Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	minApplied := uint64(1 << 62)
	for _, m := range before.Members {
		if m.SnapshotIndex != 0 {
			t.Fatalf("%s has a snapshot (%d) before the checkpoint: the test needs none", m.Node, m.SnapshotIndex)
		}
		minApplied = min(minApplied, m.AppliedIndex)
	}

	resp, err := c.ForceCheckpoint(callCtx(t, time.Minute), &adminpb.ForceCheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Queues) != 2 || resp.Queues[0].Name != "idle" || resp.Queues[1].Name != "orders" {
		t.Fatalf("checkpointed queues: %v", resp.Queues)
	}
	snapped := map[string]uint64{}
	for _, q := range resp.Queues {
		if len(q.Members) != 3 {
			t.Fatalf("%s: %d members answered, want 3", q.Name, len(q.Members))
		}
		for _, m := range q.Members {
			if m.Error != "" || m.SnapshotIndex == 0 {
				t.Fatalf("%s on %s: snapshot %d, error %q", q.Name, m.Node, m.SnapshotIndex, m.Error)
			}
			if q.Name == "orders" {
				if m.SnapshotIndex < minApplied {
					t.Fatalf("orders on %s: snapshot at %d, below the %d every member had applied", m.Node, m.SnapshotIndex, minApplied)
				}
				snapped[m.Node] = m.SnapshotIndex
			}
		}
	}

	tr.progress(200)
	tr.finish()

	// The snapshot is on disk: a restarted member has it.
	restarted := ms[0]
	restarted.Stop()
	restarted.Start()
	testwait.For(t, 20*time.Second, "the restarted member's status", func() bool {
		st, err := c.QuorumStatus(callCtx(t, 5*time.Second), &adminpb.QuorumStatusRequest{Name: "orders"})
		if err != nil {
			return false
		}
		for _, m := range st.Members {
			if m.Node == restarted.Name() && m.Role != "unreachable" {
				return m.SnapshotIndex >= snapped[m.Node]
			}
		}
		return false
	})

	_, err = c.ForceCheckpoint(callCtx(t, 5*time.Second), &adminpb.ForceCheckpointRequest{QueuePattern: "("})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a bad pattern: %v, want InvalidArgument", err)
	}
}
