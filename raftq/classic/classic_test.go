package classic

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

type fakeConsumer struct {
	mu       sync.Mutex
	got      []queue.Delivery
	full     bool // Deliver returns false
	gone     bool
	timedOut bool
}

func (c *fakeConsumer) Deliver(d queue.Delivery) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, d)
	return !c.full
}
func (c *fakeConsumer) Gone() { c.mu.Lock(); c.gone = true; c.mu.Unlock() }
func (c *fakeConsumer) TimedOut(time.Duration) {
	c.mu.Lock()
	c.timedOut = true
	c.mu.Unlock()
}
func (c *fakeConsumer) deliveries() []queue.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]queue.Delivery(nil), c.got...)
}

func newQueue(t *testing.T, cfg Config) *Queue {
	t.Helper()
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return q
}

func enqueue(t *testing.T, q *Queue, body string, p wire.Properties) error {
	t.Helper()
	var got error
	called := false
	err := q.Enqueue(context.Background(), &queue.Message{RoutingKey: "k", Properties: p, Body: []byte(body)}, func(err error) { got, called = err, true })
	if !called || got != err {
		t.Fatalf("done not called synchronously with the result (%v, %v)", got, err)
	}
	return err
}

func TestDeliverSettleBudget(t *testing.T) {
	b := queue.NewBudget(1<<20, nil)
	q := newQueue(t, Config{Name: "q", Budget: b})
	for _, s := range []string{"aa", "bbb", "c"} {
		if err := enqueue(t, q, s, wire.Properties{}); err != nil {
			t.Fatal(err)
		}
	}
	if b.Used() != 6 {
		t.Fatalf("budget %d, want 6", b.Used())
	}
	c := &fakeConsumer{}
	if err := q.Consume(c, queue.ConsumeOptions{Prefetch: 2}); err != nil {
		t.Fatal(err)
	}
	ds := c.deliveries()
	if len(ds) != 2 || string(ds[0].Message.Body) != "aa" || string(ds[1].Message.Body) != "bbb" {
		t.Fatalf("deliveries %v", ds)
	}
	q.Requeue([]uint64{ds[0].ID}, queue.ReturnNack)
	q.Settle([]uint64{ds[1].ID})
	ds = c.deliveries()
	// The requeued message comes back first, marked redelivered.
	if len(ds) != 4 || string(ds[2].Message.Body) != "aa" || !ds[2].Redelivered || string(ds[3].Message.Body) != "c" {
		t.Fatalf("after requeue: %v", ds)
	}
	if b.Used() != 3 {
		t.Fatalf("budget %d after settling bbb, want 3", b.Used())
	}
	q.Settle([]uint64{ds[2].ID, ds[3].ID})
	if b.Used() != 0 || q.Stats() != (queue.Stats{Consumers: 1}) {
		t.Fatalf("budget %d, stats %+v", b.Used(), q.Stats())
	}
}

func TestPausedConsumerHoldsCredit(t *testing.T) {
	for _, noAck := range []bool{false, true} {
		q := newQueue(t, Config{Name: "q"})
		c := &fakeConsumer{full: true}
		if err := q.Consume(c, queue.ConsumeOptions{NoAck: noAck}); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			enqueue(t, q, "m", wire.Properties{})
		}
		if n := len(c.deliveries()); n != 1 {
			t.Fatalf("noAck=%v: paused consumer got %d deliveries, want 1", noAck, n)
		}
		c.mu.Lock()
		c.full = false
		c.mu.Unlock()
		q.Resume(c)
		if n := len(c.deliveries()); n != 10 {
			t.Fatalf("noAck=%v: resumed consumer got %d deliveries, want 10", noAck, n)
		}
	}
}

func TestRejectPublishDLXAndExpiry(t *testing.T) {
	type dead struct {
		body   string
		reason raftq.Reason
	}
	got := make(chan dead, 10)
	q := newQueue(t, Config{
		Name:      "q",
		Arguments: wire.Table{"x-max-length": int32(1), "x-overflow": "reject-publish-dlx", "x-message-ttl": int32(20), "x-dead-letter-exchange": "dlx"},
		DeadLetter: func(_ context.Context, m *queue.Message, r raftq.Reason, _ int64, done func(error)) {
			got <- dead{string(m.Body), r}
			done(nil)
		},
	})
	if err := enqueue(t, q, "kept", wire.Properties{}); err != nil {
		t.Fatal(err)
	}
	if err := enqueue(t, q, "refused", wire.Properties{}); err != queue.ErrRejected {
		t.Fatalf("over the limit: %v, want ErrRejected", err)
	}
	want := []dead{{"refused", raftq.ReasonMaxLen}, {"kept", raftq.ReasonExpired}}
	for _, w := range want {
		select {
		case d := <-got:
			if d != w {
				t.Fatalf("dead letter %v, want %v", d, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no dead letter %v", w)
		}
	}
	if st := q.Stats(); st.Ready != 0 || len(q.msgs) != 0 {
		t.Fatalf("stats %+v, %d payloads", st, len(q.msgs))
	}
}

func TestUnusedExpiredAndDelete(t *testing.T) {
	unused := make(chan struct{}, 1)
	q := newQueue(t, Config{Name: "q", OnUnused: func() { unused <- struct{}{} }})
	c := &fakeConsumer{}
	q.Consume(c, queue.ConsumeOptions{})
	if err := q.Consume(&fakeConsumer{}, queue.ConsumeOptions{Exclusive: true}); err != queue.ErrExclusiveConsumer {
		t.Fatalf("exclusive over a consumer: %v", err)
	}
	q.Cancel(c)
	select {
	case <-unused:
	case <-time.After(5 * time.Second):
		t.Fatal("OnUnused not called")
	}

	expired := make(chan struct{}, 1)
	newQueue(t, Config{Name: "e", Arguments: wire.Table{"x-expires": int32(20)}, OnExpired: func() { expired <- struct{}{} }})
	select {
	case <-expired:
	case <-time.After(5 * time.Second):
		t.Fatal("OnExpired not called")
	}

	b := queue.NewBudget(1<<20, nil)
	d := newQueue(t, Config{Name: "d", Budget: b})
	c = &fakeConsumer{}
	d.Consume(c, queue.ConsumeOptions{Prefetch: 1})
	enqueue(t, d, "x", wire.Properties{})
	enqueue(t, d, "y", wire.Properties{})
	if _, err := d.Delete(true, false); err != queue.ErrInUse {
		t.Fatalf("delete if-unused: %v", err)
	}
	if n, err := d.Delete(false, false); n != 1 || err != nil {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if !c.gone || b.Used() != 0 {
		t.Fatalf("gone=%v budget=%d", c.gone, b.Used())
	}
	if err := enqueue(t, d, "z", wire.Properties{}); err != queue.ErrDeleted {
		t.Fatalf("enqueue after delete: %v", err)
	}
}

func TestGetPurgeAndPriority(t *testing.T) {
	b := queue.NewBudget(1<<20, nil)
	q := newQueue(t, Config{Name: "q", Budget: b, Arguments: wire.Table{"x-max-priority": int32(3)}})
	enqueue(t, q, "low", wire.Properties{})
	enqueue(t, q, "high", wire.Properties{Flags: wire.FlagPriority, Priority: 7})
	enqueue(t, q, "mid", wire.Properties{Flags: wire.FlagPriority, Priority: 2})
	d, remaining, ok, err := q.Get(true)
	if !ok || err != nil || string(d.Message.Body) != "high" || remaining != 2 {
		t.Fatalf("get: %q %d %v %v", d.Message.Body, remaining, ok, err)
	}
	d, _, _, _ = q.Get(false)
	if string(d.Message.Body) != "mid" {
		t.Fatalf("second get %q", d.Message.Body)
	}
	if n, err := q.Purge(); n != 1 || err != nil {
		t.Fatalf("purge %d %v", n, err)
	}
	if b.Used() != 3 { // "mid" is still unacked
		t.Fatalf("budget %d, want 3", b.Used())
	}
	q.Discard([]uint64{d.ID}, queue.ReturnReject)
	if b.Used() != 0 || len(q.msgs) != 0 {
		t.Fatalf("budget %d, %d payloads", b.Used(), len(q.msgs))
	}
	if _, err := New(Config{Arguments: wire.Table{"x-max-priority": int32(256)}}); err == nil {
		t.Fatal("x-max-priority 256 accepted")
	}
}
