package forward_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/raftq/queue"
)

// lockedBuffer is a log destination safe for the router's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestGoneQueueNacksWithoutAWarningEach: publishes to a queue whose node
// is gone are each nacked at once, with the reason, but the node warns
// once for the lot rather than once per publish (a chaos run logged more
// than a thousand such lines a second).
func TestGoneQueueNacksWithoutAWarningEach(t *testing.T) {
	a := newNode(t, "a")
	c := cluster{"a": a}
	var out lockedBuffer
	gone := &queue.NodeDownError{Node: "b", Why: "is dead"}
	r := forward.NewRouter(forward.RouterConfig{
		QueueID: "q1", Name: "/q1", Members: []string{"b"}, Leader: "b",
		Addr: c.addr, Pool: a.pool, PublishTimeout: time.Minute,
		Log:  slog.New(slog.NewTextHandler(&out, nil)),
		Gone: func() error { return gone },
	})
	t.Cleanup(r.Close)

	const n = 200
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		err := r.Enqueue(context.Background(), &queue.Message{Body: []byte("x")}, func(err error) { errs <- err })
		if err != nil {
			errs <- err
		}
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond) // several wake-ups, not one batch
		}
	}
	for i := 0; i < n; i++ {
		select {
		case err := <-errs:
			var down *queue.NodeDownError
			if !errors.As(err, &down) {
				t.Fatalf("publish %d: %v, want the node's being down", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d publishes answered", i, n)
		}
	}
	lines := strings.Count(out.String(), "publishes nacked, the queue's node is gone")
	if lines != 1 {
		t.Fatalf("%d warnings for %d nacked publishes, want 1:\n%s", lines, n, out.String())
	}
}
