package classic

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/queue"
)

// fakeConsumer records what a queue hands it. Deliver returns false while
// refuse is set, which makes the queue treat it as blocked.
type fakeConsumer struct {
	name   string
	got    []queue.Delivery
	refuse bool
	gone   int
	// onGone, if set, runs inside Gone: tests use it to prove Gone is
	// called without the queue's lock held.
	onGone func()
}

func (f *fakeConsumer) Deliver(d queue.Delivery) bool {
	f.got = append(f.got, d)
	return !f.refuse
}

func (f *fakeConsumer) Gone() {
	f.gone++
	if f.onGone != nil {
		f.onGone()
	}
}

func (f *fakeConsumer) TimedOut(time.Duration) { panic("a classic queue has no consumer timeout") }

// ids lists the IDs f was handed, in order.
func (f *fakeConsumer) ids() []uint64 {
	ids := make([]uint64, len(f.got))
	for i, d := range f.got {
		ids[i] = d.ID
	}
	return ids
}

// msg makes a message whose body names it, so tests can tell them apart.
func msg(n int) *queue.Message {
	return &queue.Message{RoutingKey: "k", Body: []byte("m" + strconv.Itoa(n))}
}

// publish enqueues n messages and fails the test on any error.
func publish(t *testing.T, q *Queue, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		var doneErr error = errNotCalled
		if err := q.Enqueue(context.Background(), msg(i), func(err error) { doneErr = err }); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		if doneErr != nil {
			t.Fatalf("done: %v, want nil before Enqueue returns", doneErr)
		}
	}
}

var errNotCalled = errors.New("done not called")

func consume(t *testing.T, q *Queue, c queue.Consumer, opts queue.ConsumeOptions) {
	t.Helper()
	if err := q.Consume(c, opts); err != nil {
		t.Fatalf("Consume: %v", err)
	}
}

func wantStats(t *testing.T, q *Queue, want queue.Stats) {
	t.Helper()
	if got := q.Stats(); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

func wantIDs(t *testing.T, what string, got []uint64, want ...uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}
