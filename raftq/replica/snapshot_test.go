package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
	"github.com/warrenmq/warren/raftq/wal"
)

// TestSnapshotCarriesLiveBodies takes a snapshot of a queue, opens it as
// raft would to send it to a new member, and restores it into an empty
// log: the new member must hold every live message's body, and none of the
// settled ones. (Compaction around live entries is tested on the store.)
func TestSnapshotCarriesLiveBodies(t *testing.T) { eachStorage(t, testSnapshotCarriesLiveBodies) }

func testSnapshotCarriesLiveBodies(t *testing.T, st storage) {
	dir := t.TempDir()
	node := st.node(t)
	r := openTest(t, node, dir, nil)
	enqueue(t, r, 50)
	c := &fakeConsumer{}
	if err := r.Consume(c, queue.ConsumeOptions{Prefetch: 20}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "20 deliveries", func() bool { return len(c.ids()) == 20 })
	r.Settle(c.ids()[:20]) // m0..m19 settled; 20 more go out, unsettled
	testwait.For(t, 5*time.Second, "next 20 deliveries", func() bool { return len(c.ids()) == 40 })
	testwait.For(t, 5*time.Second, "settles applied", func() bool { st := r.Stats(); return st.Ready+st.Unacked == 30 })
	if err := r.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}

	list, err := r.storage.snaps.List()
	if err != nil || len(list) == 0 {
		t.Fatalf("snapshots: %v %v", list, err)
	}
	meta, rc, err := r.storage.snaps.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	// The new member's empty log: a group of another node's log.
	other, err := wal.Open(t.TempDir(), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	fresh, err := other.Group("q")
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingReader{r: rc}
	m, err := restoreSnapshot(counted, fresh)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if counted.n != meta.Size {
		t.Fatalf("snapshot stream was %d bytes, meta says %d", counted.n, meta.Size)
	}
	if st := m.Stats(); st.Ready+st.Unacked != 30 {
		t.Fatalf("restored machine holds %d messages, want 30", st.Ready+st.Unacked)
	}
	for _, i := range m.AppendLiveIndexes(nil) {
		var got raft.Log
		if err := fresh.GetLog(i, &got); err != nil {
			t.Fatalf("live message %d missing from the new member's log: %v", i, err)
		}
	}
	bodies := map[string]bool{}
	first, _ := fresh.FirstIndex()
	last, _ := fresh.LastIndex()
	for i := first; i <= last; i++ {
		var got raft.Log
		if fresh.GetLog(i, &got) != nil {
			continue
		}
		msg, err := decodeEntryMessage(got.Data)
		if err != nil {
			t.Fatal(err)
		}
		bodies[string(msg.Body)] = true
	}
	for i := 0; i < 50; i++ {
		if want := i >= 20; bodies[fmt.Sprintf("m%d", i)] != want {
			t.Errorf("m%d in the new member's log: %v, want %v", i, !want, want)
		}
	}

	// The node itself restarts from the snapshot and its sparse log.
	r.Close()
	node.restart(t)
	r = openTest(t, node, dir, nil)
	defer r.Close()
	seen := 0
	for {
		d, _, ok, err := r.Get(true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if d.Message.Body[0] != 'm' {
			t.Fatalf("bad body %q", d.Message.Body)
		}
		seen++
	}
	if seen != 30 {
		t.Fatalf("after restart from the snapshot: %d messages, want 30", seen)
	}
}

type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
