package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestDeadLetterOffTheFSM: dead letters are published off raft's FSM
// goroutine and without the replica's locks, in the order the machine
// dead-lettered them, and a target that blocks holds up neither the queue
// nor its publishers.
func TestDeadLetterOffTheFSM(t *testing.T) {
	release := make(chan struct{})
	got := make(chan string, 10)
	var r *Replica
	r, err := Open(Config{
		Name:      "test/dl",
		Dir:       t.TempDir(),
		NodeID:    "n1",
		Arguments: wire.Table{"x-dead-letter-exchange": "", "x-max-length": int64(1)},
		Created:   1,
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		DeadLetter: func(ctx context.Context, m *queue.Message, reason raftq.Reason, at int64, done func(error)) {
			<-release // a target with no room
			r.Stats() // takes fsm.mu: deadlocks if called under it
			got <- string(m.Body) + " " + reason.String()
			done(nil)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	enqueue(t, r, 4) // confirmed although the dead letters are stuck
	if st := r.Stats(); st.Ready != 1 {
		t.Fatalf("%d ready, want 1", st.Ready)
	}
	close(release)
	for _, want := range []string{"m0 maxlen", "m1 maxlen", "m2 maxlen"} {
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("dead letter %q, want %q", g, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no dead letter %q", want)
		}
	}
}

// TestOldLeaderStopsSendingQueuedDeadLetters: at-least-once dead letters
// queued at a leader behind a slow target are the new leader's to send
// once the leadership moves: it sends again what the machine still holds,
// after a grace in which the old leader passes on the confirms of those it
// had sent already. Before, the old leader went on sending its queue and
// the new one sent everything again at once: each a copy in the target
// (the chaos harness counted 802 in one run).
func TestOldLeaderStopsSendingQueuedDeadLetters(t *testing.T) {
	var mu sync.Mutex
	sent := map[string]int{}
	block := make(chan struct{})
	var blocked atomic.Bool
	isBlocked := make(chan struct{})
	var g *group
	g = newGroupWith(t, perQueueFiles, func(n string, cfg *Config) {
		cfg.Arguments = wire.Table{"x-dead-letter-exchange": "", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}
		cfg.DeadLetter = func(ctx context.Context, m *queue.Message, _ raftq.Reason, _ int64, done func(error)) {
			if blocked.CompareAndSwap(false, true) {
				close(isBlocked)
				select { // a target slow to confirm
				case <-block:
				case <-ctx.Done():
					return
				}
			}
			mu.Lock()
			sent[string(m.Body)]++
			mu.Unlock()
			done(nil)
		}
		cfg.SettleAtLeader = passToLeader(t, &g)
	})
	old, l := g.leader()
	publish(t, l, 0, 10)
	fc := &fakeConsumer{}
	if err := l.Consume(fc, queue.ConsumeOptions{Tag: "c", Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "10 deliveries", func() bool { return len(fc.deliveries()) == 10 })
	var ids []uint64
	for _, d := range fc.deliveries() {
		ids = append(ids, d.ID)
	}
	l.Discard(ids, queue.ReturnReject) // ten dead letters, the first on its way
	select {
	case <-isBlocked:
	case <-time.After(10 * time.Second):
		t.Fatal("no dead letter sent")
	}
	to := "a"
	if old == "a" {
		to = "b"
	}
	if err := l.TransferLeadership(to, to); err != nil {
		t.Fatal(err)
	}
	_, nl := g.leader()
	close(block) // the old leader's send is confirmed, after the move
	testwait.For(t, 20*time.Second, "every dead letter settled", func() bool { return nl.Stats().DeadLettered == 0 })
	time.Sleep(time.Second) // the old leader's queue, were it still sending
	mu.Lock()
	defer mu.Unlock()
	for i := range 10 {
		if n := sent[fmt.Sprintf("m%d", i)]; n != 1 {
			t.Errorf("m%d sent %d times, want once", i, n)
		}
	}
}
