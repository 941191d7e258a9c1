package classic

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/queue"
)

// bufferedConsumer behaves like an AMQP channel: Deliver only appends to an
// outbound buffer and reports it full past limit; another goroutine drains
// it, settles what it took, and resumes the consumer if it had filled up.
type bufferedConsumer struct {
	limit  int
	wake   chan struct{}
	mu     sync.Mutex
	buffer []uint64
}

func (c *bufferedConsumer) Deliver(d queue.Delivery) bool {
	c.mu.Lock()
	c.buffer = append(c.buffer, d.ID)
	room := len(c.buffer) < c.limit
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return room
}

func (c *bufferedConsumer) Gone() {}

func (c *bufferedConsumer) TimedOut(time.Duration) {}

// drain settles (or, every seventh batch, requeues) what c is handed until
// stop is closed, counting settled messages into settled.
func (c *bufferedConsumer) drain(q *Queue, settled chan<- int, stop <-chan struct{}) {
	for batch := 0; ; batch++ {
		select {
		case <-c.wake:
		case <-stop:
			return
		}
		c.mu.Lock()
		ids := c.buffer
		wasFull := len(ids) >= c.limit
		c.buffer = nil
		c.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		if batch%7 == 3 {
			q.Requeue(ids, queue.ReturnNack)
		} else {
			q.Settle(ids)
			settled <- len(ids)
		}
		if wasFull {
			q.Resume(c)
		}
	}
}

// TestConcurrentPublishersAndConsumers runs publishers, consumers and
// basic.get side by side (under -race, this is the locking test) and checks
// that every message is settled exactly once and nothing is left behind.
func TestConcurrentPublishersAndConsumers(t *testing.T) {
	const publishers, perPublisher = 4, 2000
	q := New("q", Options{})
	stop := make(chan struct{})
	settled := make(chan int, 64)
	var drainers sync.WaitGroup
	for i, opts := range []queue.ConsumeOptions{{Prefetch: 10}, {Prefetch: 50, Priority: 1}, {}} {
		c := &bufferedConsumer{limit: 5 + 10*i, wake: make(chan struct{}, 1)}
		if err := q.Consume(c, opts); err != nil {
			t.Fatal(err)
		}
		drainers.Add(1)
		go func() { defer drainers.Done(); c.drain(q, settled, stop) }()
	}

	var publishing sync.WaitGroup
	for range publishers {
		publishing.Add(1)
		go func() {
			defer publishing.Done()
			for i := range perPublisher {
				if err := q.Enqueue(context.Background(), msg(i), nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	publishing.Add(1)
	go func() { // basic.get competes with the consumers
		defer publishing.Done()
		for range 500 {
			if _, _, ok, _ := q.Get(true); ok {
				settled <- 1
			}
		}
	}()

	total := 0
	deadline := time.After(30 * time.Second)
	for total < publishers*perPublisher {
		select {
		case n := <-settled:
			total += n
		case <-deadline:
			t.Fatalf("settled %d of %d; queue %+v", total, publishers*perPublisher, q.Stats())
		}
	}
	publishing.Wait()
	close(stop)
	drainers.Wait()
	if total != publishers*perPublisher {
		t.Fatalf("settled %d, want %d", total, publishers*perPublisher)
	}
	wantStats(t, q, queue.Stats{Consumers: 3})
}
