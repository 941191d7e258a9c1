package classic

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestReconfigureMaxLength: a lower x-max-length with drop-head
// dead-letters the excess, oldest first, before Reconfigure returns
// (rabbit_fifo: update_config, then checkout/4's evaluate_limit), and
// their payloads are released.
func TestReconfigureMaxLength(t *testing.T) {
	got := make(chan string, 20)
	b := queue.NewBudget(1<<20, nil)
	q := newQueue(t, Config{
		Name:      "q",
		Arguments: wire.Table{"x-max-length": int64(10), "x-dead-letter-exchange": "dlx"},
		Budget:    b,
		DeadLetter: func(_ context.Context, m *queue.Message, r raftq.Reason, _ int64, done func(error)) {
			got <- string(m.Body) + " " + r.String()
			done(nil)
		},
	})
	for i := 0; i < 10; i++ {
		if err := enqueue(t, q, fmt.Sprintf("m%d", i), wire.Properties{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Reconfigure(wire.Table{"x-max-length": int64(5), "x-overflow": "drop-head", "x-dead-letter-exchange": "dlx"}); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Ready != 5 || len(q.msgs) != 5 || b.Used() != 10 {
		t.Fatalf("stats %+v, %d payloads, budget %d; want 5, 5, 10", st, len(q.msgs), b.Used())
	}
	for i := 0; i < 5; i++ {
		select {
		case d := <-got:
			if want := fmt.Sprintf("m%d maxlen", i); d != want {
				t.Fatalf("dead letter %q, want %q", d, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no dead letter m%d", i)
		}
	}
	d, _, ok, err := q.Get(true)
	if err != nil || !ok || string(d.Message.Body) != "m5" {
		t.Fatalf("get: %q %v %v, want m5", d.Message.Body, ok, err)
	}
}

// TestReconfigureDeliveryLimit: classic queues have no delivery limit, so
// x-delivery-limit changes nothing; dead-lettering switched on by the
// update applies to the next rejection.
func TestReconfigureDeliveryLimit(t *testing.T) {
	got := make(chan string, 1)
	q := newQueue(t, Config{
		Name: "q",
		DeadLetter: func(_ context.Context, m *queue.Message, r raftq.Reason, _ int64, done func(error)) {
			got <- string(m.Body) + " " + r.String()
			done(nil)
		},
	})
	if err := enqueue(t, q, "m", wire.Properties{}); err != nil {
		t.Fatal(err)
	}
	if err := q.Reconfigure(wire.Table{"x-delivery-limit": int64(1), "x-dead-letter-exchange": "dlx"}); err != nil {
		t.Fatal(err)
	}
	if c := q.Config(); c.DeliveryLimit != raftq.Unset || !c.DeadLettering {
		t.Fatalf("config %+v", c)
	}
	for i := 0; i < 3; i++ {
		d, _, ok, _ := q.Get(false)
		if !ok {
			t.Fatalf("return %d: message gone", i)
		}
		q.Requeue([]uint64{d.ID}, queue.ReturnReject)
	}
	d, _, _, _ := q.Get(false)
	q.Discard([]uint64{d.ID}, queue.ReturnReject)
	select {
	case g := <-got:
		if g != "m rejected" {
			t.Fatalf("dead letter %q", g)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no dead letter")
	}
}

// TestReconfigureMessageTTL: the TTL is stamped at enqueue, so a new
// x-message-ttl applies to new messages, and removing it does not save a
// message stamped before.
func TestReconfigureMessageTTL(t *testing.T) {
	q := newQueue(t, Config{Name: "q", Arguments: wire.Table{"x-max-priority": int64(5)}})
	if err := q.Reconfigure(wire.Table{"x-message-ttl": int64(30), "x-max-priority": int64(0)}); err != nil {
		t.Fatal(err)
	}
	if err := enqueue(t, q, "short", wire.Properties{}); err != nil {
		t.Fatal(err)
	}
	if err := q.Reconfigure(nil); err != nil {
		t.Fatal(err)
	}
	if c := q.Config(); c.MessageTTL != raftq.Unset || c.MaxPriority != 5 {
		t.Fatalf("config %+v: want no TTL, priorities kept", c)
	}
	if err := enqueue(t, q, "kept", wire.Properties{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "short expired", func() bool { return q.Stats().Ready == 1 })
	d, _, ok, err := q.Get(true)
	if err != nil || !ok || string(d.Message.Body) != "kept" {
		t.Fatalf("get: %q %v %v, want kept", d.Message.Body, ok, err)
	}
}

// TestReconfigureRefuses: invalid arguments change nothing; a deleted
// queue says so.
func TestReconfigureRefuses(t *testing.T) {
	q := newQueue(t, Config{Name: "q", Arguments: wire.Table{"x-max-length": int64(2)}})
	var argErr *raftq.ArgError
	if err := q.Reconfigure(wire.Table{"x-overflow": "sideways"}); !errors.As(err, &argErr) {
		t.Fatalf("Reconfigure = %v, want an ArgError", err)
	}
	if c := q.Config(); c.MaxLength != 2 {
		t.Fatalf("config changed: %+v", c)
	}
	q.Delete(false, false)
	if err := q.Reconfigure(nil); err != queue.ErrDeleted {
		t.Fatalf("Reconfigure after delete = %v", err)
	}
}

// TestReconfigureRejectPublishDLX: x-overflow=reject-publish-dlx, which
// the machine does not know, follows the update too.
func TestReconfigureRejectPublishDLX(t *testing.T) {
	got := make(chan string, 4)
	q := newQueue(t, Config{
		Name:      "q",
		Arguments: wire.Table{"x-max-length": int64(0), "x-overflow": "reject-publish-dlx", "x-dead-letter-exchange": "dlx"},
		DeadLetter: func(_ context.Context, m *queue.Message, r raftq.Reason, _ int64, done func(error)) {
			got <- string(m.Body)
			done(nil)
		},
	})
	if err := enqueue(t, q, "a", wire.Properties{}); err != queue.ErrRejected {
		t.Fatalf("enqueue: %v", err)
	}
	if err := q.Reconfigure(wire.Table{"x-max-length": int64(0), "x-overflow": "reject-publish", "x-dead-letter-exchange": "dlx"}); err != nil {
		t.Fatal(err)
	}
	if err := enqueue(t, q, "b", wire.Properties{}); err != queue.ErrRejected {
		t.Fatalf("enqueue: %v", err)
	}
	if err := q.Reconfigure(wire.Table{"x-max-length": int64(0), "x-overflow": "reject-publish-dlx", "x-dead-letter-exchange": "dlx"}); err != nil {
		t.Fatal(err)
	}
	if err := enqueue(t, q, "c", wire.Properties{}); err != queue.ErrRejected {
		t.Fatalf("enqueue: %v", err)
	}
	for _, want := range []string{"a", "c"} {
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("dead letter %q, want %q (b was refused without dead-lettering)", g, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no dead letter %q", want)
		}
	}
}
