package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

type fakeConsumer struct {
	mu       sync.Mutex
	got      []queue.Delivery
	gone     bool
	timedOut bool
}

func (f *fakeConsumer) Deliver(d queue.Delivery) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, d)
	return true
}

func (f *fakeConsumer) Gone() {
	f.mu.Lock()
	f.gone = true
	f.mu.Unlock()
}

func (f *fakeConsumer) TimedOut(time.Duration) {
	f.mu.Lock()
	f.timedOut = true
	f.mu.Unlock()
}

func (f *fakeConsumer) deliveries() []queue.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

func (f *fakeConsumer) ids() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []uint64
	for _, d := range f.got {
		ids = append(ids, d.ID)
	}
	return ids
}

// openTest opens a one-member queue in dir, its log on node's storage
// (nil: a file in dir).
func openTest(t *testing.T, node *testNode, dir string, args wire.Table) *Replica {
	t.Helper()
	cfg := Config{
		Name:      "test/q",
		Dir:       dir,
		NodeID:    "n1",
		Arguments: args,
		Created:   1,
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	node.configure(&cfg)
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// enqueue publishes n messages and waits for their answers. It reports
// failures with t.Errorf, never t.Fatal, so that tests may call it from
// goroutines of their own.
func enqueue(t *testing.T, r *Replica, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		msg := &queue.Message{RoutingKey: "q", Body: []byte(fmt.Sprintf("m%d", i))}
		if err := r.Enqueue(context.Background(), msg, func(err error) {
			if err != nil {
				t.Errorf("enqueue: %v", err)
			}
			wg.Done()
		}); err != nil {
			break // the callback has reported it
		}
	}
	wg.Wait()
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

func TestConsumeCancelRequeue(t *testing.T) { eachStorage(t, testConsumeCancelRequeue) }

func testConsumeCancelRequeue(t *testing.T, st storage) {
	r := openTest(t, st.node(t), t.TempDir(), nil)
	defer r.Close()
	enqueue(t, r, 10)
	c := &fakeConsumer{}
	if err := r.Consume(c, queue.ConsumeOptions{Prefetch: 4}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "4 deliveries", func() bool { return len(c.ids()) == 4 })
	r.Settle(c.ids()[:2])
	testwait.For(t, 5*time.Second, "6 deliveries", func() bool { return len(c.ids()) == 6 })
	r.Cancel(c)
	r.Requeue(c.ids()[2:], queue.ReturnConsumerGone)
	testwait.For(t, 5*time.Second, "8 ready", func() bool { st := r.Stats(); return st.Ready == 8 && st.Unacked == 0 })
	d, remaining, ok, err := r.Get(true)
	if err != nil || !ok || remaining != 7 || string(d.Message.Body) != "m2" || !d.Redelivered {
		t.Fatalf("get after requeue: %q remaining %d ok %v redelivered %v err %v", d.Message.Body, remaining, ok, d.Redelivered, err)
	}
}

func TestRestartKeepsMessages(t *testing.T) { eachStorage(t, testRestartKeepsMessages) }

func testRestartKeepsMessages(t *testing.T, st storage) {
	dir := t.TempDir()
	node := st.node(t)
	r := openTest(t, node, dir, nil)
	enqueue(t, r, 20)
	c := &fakeConsumer{}
	if err := r.Consume(c, queue.ConsumeOptions{Prefetch: 5}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "5 deliveries", func() bool { return len(c.ids()) == 5 })
	r.Settle(c.ids()[:3])
	// The settles give the consumer room for 3 more: once it has them,
	// the settles are applied (Unacked is 5 before and after).
	testwait.For(t, 5*time.Second, "settled", func() bool { return len(c.ids()) == 8 })
	r.Close()
	node.restart(t)

	r = openTest(t, node, dir, nil)
	defer r.Close()
	// The consumer of the first run is gone: its 5 unsettled come back.
	testwait.For(t, 5*time.Second, "17 ready after restart", func() bool { return r.Stats().Ready == 17 })
	seen := map[string]bool{}
	for {
		d, _, ok, err := r.Get(true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		seen[string(d.Message.Body)] = true
	}
	if len(seen) != 17 || seen["m0"] || seen["m1"] || seen["m2"] || !seen["m3"] || !seen["m19"] {
		t.Fatalf("after restart got %v", seen)
	}
}

func TestSnapshotThresholdFollowsBacklog(t *testing.T) {
	r := openTest(t, nil, t.TempDir(), nil)
	defer r.Close()
	if got := r.raft.ReloadableConfig().SnapshotThreshold; got != minSnapshotThreshold {
		t.Fatalf("initial threshold %d", got)
	}
	for _, c := range []struct {
		cur    uint64
		live   int
		want   uint64
		change bool
	}{
		{minSnapshotThreshold, 100000, 200000, true},
		{200000, 90000, 180000, false}, // within a factor of two
		{200000, 10, minSnapshotThreshold, true},
		{minSnapshotThreshold, 5000, minSnapshotThreshold, false},
	} {
		if got, change := snapshotThreshold(c.cur, c.live); got != c.want || change != c.change {
			t.Errorf("threshold at %d with %d live: %d, %v; want %d, %v", c.cur, c.live, got, change, c.want, c.change)
		}
	}
	// The replica applies it: a backlog published raises it.
	publish(t, r, 0, 20000)
	testwait.For(t, 20*time.Second, "the threshold to follow the backlog", func() bool {
		return r.raft.ReloadableConfig().SnapshotThreshold == 40000
	})
}

func TestDeleteRemovesFiles(t *testing.T) { eachStorage(t, testDeleteRemovesFiles) }

func testDeleteRemovesFiles(t *testing.T, st storage) {
	dir := filepath.Join(t.TempDir(), "q")
	node := st.node(t)
	r := openTest(t, node, dir, nil)
	enqueue(t, r, 3)
	if node == nil {
		if _, err := os.Stat(filepath.Join(dir, "wal")); err != nil {
			t.Fatalf("log file missing while the queue lives: %v", err)
		}
	} else if groups := node.log.Groups(); !slices.Equal(groups, []string{"q"}) {
		t.Fatalf("node log groups %v while the queue lives, want [q]", groups)
	}
	n, err := r.Delete(false, false)
	if err != nil || n != 3 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("queue directory still there after delete: %v", err)
	}
	if node != nil {
		if groups := node.log.Groups(); len(groups) != 0 {
			t.Fatalf("node log groups %v after delete, want none", groups)
		}
	}
}
