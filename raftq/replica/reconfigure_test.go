package replica

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

// deadLetters records what a replica dead-letters.
type deadLetters struct {
	mu  sync.Mutex
	got []string
}

func (d *deadLetters) publish(_ context.Context, m *queue.Message, reason raftq.Reason, _ int64, done func(error)) {
	d.mu.Lock()
	d.got = append(d.got, string(m.Body)+" "+reason.String())
	d.mu.Unlock()
	done(nil)
}

func (d *deadLetters) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

func openWithDeadLetters(t *testing.T, node *testNode, dir string, args wire.Table, dl *deadLetters) *Replica {
	t.Helper()
	cfg := Config{
		Name: "test/q", Dir: dir, NodeID: "n1", Arguments: args, Created: 1,
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		DeadLetter: dl.publish,
	}
	node.configure(&cfg)
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReconfigureMaxLength: a lower x-max-length with drop-head removes the
// excess, oldest first, in the update's own entry (rabbit_fifo's
// update_config is followed by checkout/4's evaluate_limit), so Reconfigure
// returns with the queue within its new limit; the new configuration is in
// the log and survives a restart.
func TestReconfigureMaxLength(t *testing.T) { eachStorage(t, testReconfigureMaxLength) }

func testReconfigureMaxLength(t *testing.T, st storage) {
	dir := t.TempDir()
	node := st.node(t)
	dl := &deadLetters{}
	declared := wire.Table{"x-max-length": int64(10), "x-dead-letter-exchange": ""}
	r := openWithDeadLetters(t, node, dir, declared, dl)
	enqueue(t, r, 10)
	if st := r.Stats(); st.Ready != 10 {
		t.Fatalf("%d ready, want 10", st.Ready)
	}
	err := r.Reconfigure(wire.Table{"x-max-length": int64(5), "x-overflow": "drop-head", "x-dead-letter-exchange": ""})
	if err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Ready != 5 {
		t.Fatalf("%d ready after Reconfigure, want 5 at once", st.Ready)
	}
	want := []string{"m0 maxlen", "m1 maxlen", "m2 maxlen", "m3 maxlen", "m4 maxlen"}
	testwait.For(t, 5*time.Second, "5 dead letters", func() bool { return len(dl.list()) == 5 })
	for i, g := range dl.list() {
		if g != want[i] {
			t.Fatalf("dead letters %v, want %v", dl.list(), want)
		}
	}
	d, _, ok, err := r.Get(true)
	if err != nil || !ok || string(d.Message.Body) != "m5" {
		t.Fatalf("get: %q %v %v, want m5", d.Message.Body, ok, err)
	}
	r.Close()
	node.restart(t)

	// Reopened with the declared arguments: the log says 5.
	r = openWithDeadLetters(t, node, dir, declared, dl)
	defer r.Close()
	if got := r.queueConfig().MaxLength; got != 5 {
		t.Fatalf("max length %d after restart, want 5", got)
	}
	enqueue(t, r, 3) // 4 + 3
	if st := r.Stats(); st.Ready != 5 {
		t.Fatalf("%d ready, want 5", st.Ready)
	}
}

// TestReconfigureDeliveryLimit: a lowered x-delivery-limit applies when a
// message next comes back (rabbit_fifo return_one/8), not at once.
func TestReconfigureDeliveryLimit(t *testing.T) {
	dl := &deadLetters{}
	r := openWithDeadLetters(t, nil, t.TempDir(), wire.Table{"x-delivery-limit": int64(5), "x-dead-letter-exchange": ""}, dl)
	defer r.Close()
	enqueue(t, r, 1)
	reject := func(cause queue.ReturnCause) {
		t.Helper()
		d, _, ok, err := r.Get(false)
		if err != nil || !ok {
			t.Fatalf("get: %v %v", ok, err)
		}
		r.Requeue([]uint64{d.ID}, cause)
	}
	for i := 0; i < 2; i++ {
		reject(queue.ReturnReject)
		testwait.For(t, 5*time.Second, "returned", func() bool { st := r.Stats(); return st.Ready == 1 && st.Unacked == 0 })
	}
	// delivery-count 2, now over the new limit of 1: it stays ready.
	if err := r.Reconfigure(wire.Table{"x-delivery-limit": int64(1), "x-dead-letter-exchange": ""}); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Ready != 1 {
		t.Fatalf("%d ready after Reconfigure, want 1", st.Ready)
	}
	// A nack does not count a failed delivery, but the count is past the
	// limit when it comes back.
	reject(queue.ReturnNack)
	testwait.For(t, 5*time.Second, "dead-lettered", func() bool { return len(dl.list()) == 1 })
	if got := dl.list()[0]; got != "m0 delivery_limit" {
		t.Fatalf("dead letter %q", got)
	}
	if st := r.Stats(); st.Ready != 0 || st.Unacked != 0 {
		t.Fatalf("stats %+v, want empty", st)
	}
}

// TestReconfigureMessageTTL: rabbit_fifo stamps a message's expiry when it
// is enqueued, so a new x-message-ttl applies to messages enqueued after
// it, and removing it does not save one stamped before.
func TestReconfigureMessageTTL(t *testing.T) {
	r := openTest(t, nil, t.TempDir(), nil)
	defer r.Close()
	if err := r.Reconfigure(wire.Table{"x-message-ttl": int64(50)}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, r, 1) // m0: expires 50ms from now
	if err := r.Reconfigure(nil); err != nil {
		t.Fatal(err)
	}
	if got := r.queueConfig().MessageTTL; got != raftq.Unset {
		t.Fatalf("message TTL %d, want unset", got)
	}
	msg := &queue.Message{RoutingKey: "q", Body: []byte("kept")}
	done := make(chan error, 1)
	if err := r.Enqueue(context.Background(), msg, func(err error) { done <- err }); err != nil || <-done != nil {
		t.Fatal("enqueue")
	}
	testwait.For(t, 5*time.Second, "m0 expired", func() bool { return r.Stats().Ready == 1 })
	d, _, ok, err := r.Get(true)
	if err != nil || !ok || string(d.Message.Body) != "kept" {
		t.Fatalf("get: %q %v %v, want kept", d.Message.Body, ok, err)
	}
}

// TestReconfigureRefusesBadArguments: an invalid argument is refused as
// declare refuses it, and nothing is proposed.
func TestReconfigureRefusesBadArguments(t *testing.T) {
	r := openTest(t, nil, t.TempDir(), wire.Table{"x-max-length": int64(3)})
	defer r.Close()
	lastIndex := func() uint64 {
		r.fsm.mu.Lock()
		defer r.fsm.mu.Unlock()
		return r.fsm.m.LastIndex()
	}
	// Settled first: a new leader's entries (its machine upgrade among
	// them) land a moment after Open, and a loaded machine saw them
	// arrive between the two readings below.
	testwait.For(t, 5*time.Second, "the queue's machine upgraded", func() bool { return r.MachineVersion() == raftq.MachineVersion })
	before := lastIndex()
	err := r.Reconfigure(wire.Table{"x-max-length": int64(-1)})
	var argErr *raftq.ArgError
	if !errors.As(err, &argErr) || argErr.Key != "x-max-length" {
		t.Fatalf("Reconfigure = %v, want an ArgError for x-max-length", err)
	}
	if got, after := r.queueConfig().MaxLength, lastIndex(); got != 3 || after != before {
		t.Fatalf("max length %d, last index %d (was %d): something changed", got, after, before)
	}
}

// TestReconfigureSingleActiveConsumerStays: x-single-active-consumer is not
// a policy key; the machine keeps the declared value.
func TestReconfigureSingleActiveConsumerStays(t *testing.T) {
	r := openTest(t, nil, t.TempDir(), wire.Table{"x-single-active-consumer": true})
	defer r.Close()
	if err := r.Reconfigure(wire.Table{"x-max-length": int64(3)}); err != nil {
		t.Fatal(err)
	}
	if c := r.Config(); !c.SingleActiveConsumer || c.MaxLength != 3 {
		t.Fatalf("config %+v", c)
	}
}

// TestReconfigureEndsAtLeastOnce: leaving at-least-once deletes the dead
// letters awaiting confirmation (rabbit_fifo switch_from/3).
func TestReconfigureEndsAtLeastOnce(t *testing.T) {
	stuck := func(_ context.Context, _ *queue.Message, _ raftq.Reason, _ int64, done func(error)) {
		done(errors.New("no route"))
	}
	args := wire.Table{"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}
	r, err := Open(Config{
		Name: "test/q", Dir: t.TempDir(), NodeID: "n1", Arguments: args, Created: 1,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), DeadLetter: stuck,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	enqueue(t, r, 1)
	d, _, _, err := r.Get(false)
	if err != nil {
		t.Fatal(err)
	}
	r.Discard([]uint64{d.ID}, queue.ReturnReject)
	pending := func() int {
		r.fsm.mu.Lock()
		defer r.fsm.mu.Unlock()
		return r.fsm.m.Stats().DeadLettered
	}
	testwait.For(t, 5*time.Second, "an at-least-once dead letter", func() bool { return pending() == 1 })
	args["x-dead-letter-strategy"] = "at-most-once"
	if err := r.Reconfigure(args); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 0 {
		t.Fatalf("%d dead letters still pending", n)
	}
}

// TestGroupReconfigure: the update is one log entry: every member applies
// it; a follower refuses to propose it.
func TestGroupReconfigure(t *testing.T) { eachStorage(t, testGroupReconfigure) }

func testGroupReconfigure(t *testing.T, st storage) {
	g := newGroup(t, st)
	leader, r := g.leader()
	publish(t, r, 0, 8)
	if err := r.Reconfigure(wire.Table{"x-max-length": int64(3)}); err != nil {
		t.Fatal(err)
	}
	for n, m := range g.members {
		testwait.For(t, 20*time.Second, "member "+n+" reconfigured", func() bool {
			return m.queueConfig().MaxLength == 3 && m.Stats().Ready == 3
		})
		if n != leader {
			if err := m.Reconfigure(wire.Table{"x-max-length": int64(1)}); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("follower %s: Reconfigure = %v, want ErrNotLeader", n, err)
			}
		}
	}
}
