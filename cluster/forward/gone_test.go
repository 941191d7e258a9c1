package forward_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/raftq/queue"
)

// TestGoneQueueNeverHoldsUpThePublisher: publishes to an in-memory queue
// whose node gossip reports dead are nacked at once, however many come.
// A publisher that sends each nacked publish again (an RPC server whose
// reply to a cut-off client's queue is nacked requeues the request, and
// answers it again) must not fill the router's bound on unconfirmed
// publishes with publishes nobody will answer: Enqueue would then block
// the publishing connection's reader until the node came back, and the
// connection could not even be closed. Once the node is back, publishes
// reach it again.
func TestGoneQueueNeverHoldsUpThePublisher(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	c := cluster{"a": a, "b": b}
	var down atomic.Bool
	down.Store(true)
	gone := &queue.NodeDownError{Node: "b", Why: "is dead"}
	r := forward.NewRouter(forward.RouterConfig{
		QueueID: "q1", Name: "/q1", Members: []string{"b"}, Leader: "b",
		Addr: c.addr, Pool: a.pool, PublishTimeout: time.Minute,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Gone: func() error {
			if down.Load() {
				return gone
			}
			return nil
		},
	})
	t.Cleanup(r.Close)

	const n = 3 * 4096 // three times the router's bound
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < n; i++ {
		answered := make(chan error, 1)
		enqueued := make(chan error, 1)
		go func() {
			enqueued <- r.Enqueue(context.Background(), &queue.Message{Body: []byte("x")}, func(err error) { answered <- err })
		}()
		select {
		case <-enqueued:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("publish %d of %d still blocked in Enqueue: the nacked publishes held up the publisher", i, n)
		}
		select {
		case err := <-answered:
			var nd *queue.NodeDownError
			if !errors.As(err, &nd) {
				t.Fatalf("publish %d: %v, want the node's being down", i, err)
			}
		case <-time.After(time.Until(deadline)):
			t.Fatalf("publish %d of %d not answered", i, n)
		}
	}

	down.Store(false)
	b.openReplica("q1")
	answered := make(chan error, 1)
	if err := r.Enqueue(context.Background(), &queue.Message{Body: []byte("back")}, func(err error) { answered <- err }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("publish after the node's return: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("publish after the node's return not answered")
	}
}
