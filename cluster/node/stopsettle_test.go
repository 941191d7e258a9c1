package node_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestAcksKeptWhenTheLeaderStops: consumers on one node ack every message
// of queues led by another node, and prove each batch of acks read with a
// basic.qos round trip, while that leader's node stops gracefully. A
// graceful stop hands the leaderships off, and the acks its members get
// meanwhile are passed on to the new leaders; none may be lost with the
// stopping node. Once the consumers have acked everything and gone, no
// message is back in the queues.
func TestAcksKeptWhenTheLeaderStops(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	c := adminClient(t, ms[1])
	const queues, perQueue = 8, 1000
	pub := ms[2].Channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for q := range queues {
		name := fmt.Sprintf("acked%d", q)
		if _, err := ms[2].Channel().QueueDeclare(name, true, false, false, false, quorum); err != nil {
			t.Fatal(err)
		}
		if queueLeader(t, c, name) != ms[0].Name() {
			if _, err := c.TransferLeadership(callCtx(t, 30*time.Second), &adminpb.TransferLeadershipRequest{Name: name, To: ms[0].Name()}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range perQueue {
			dc, err := pub.PublishWithDeferredConfirmWithContext(callCtx(t, 30*time.Second), "", name, false, false,
				amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: fmt.Appendf(nil, "%s-%d", name, i)})
			if err != nil {
				t.Fatal(err)
			}
			if i == perQueue-1 {
				if ok, err := dc.WaitContext(callCtx(t, 30*time.Second)); !ok || err != nil {
					t.Fatalf("confirm: %v %v", ok, err)
				}
			}
		}
	}

	var (
		mu        sync.Mutex
		delivered = map[string]int{}
		read      = map[string]bool{} // acked, and the ack read (a qos answered after it)
		again     []string            // delivered after its ack was read
	)
	var wg sync.WaitGroup
	conn := ms[1].Dial()
	defer conn.Close()
	var chans []*amqp091.Channel
	for q := range queues {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
		if err := ch.Qos(50, 0, false); err != nil {
			t.Fatal(err)
		}
		ds, err := ch.Consume(fmt.Sprintf("acked%d", q), "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var unproven []string
			prove := func() bool {
				if ch.Qos(50, 0, false) != nil {
					return false
				}
				mu.Lock()
				for _, b := range unproven {
					read[b] = true
				}
				mu.Unlock()
				unproven = unproven[:0]
				return true
			}
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case d, ok := <-ds:
					if !ok {
						return
					}
					body := string(d.Body)
					mu.Lock()
					if read[body] {
						again = append(again, body)
					}
					delivered[body]++
					mu.Unlock()
					if d.Ack(false) != nil {
						return
					}
					unproven = append(unproven, body)
					if len(unproven) >= 5 && !prove() {
						return
					}
				case <-tick.C:
					if len(unproven) > 0 && !prove() {
						return
					}
				}
			}
		}()
	}
	count := func() (distinct, proven int) {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered), len(read)
	}
	testwait.For(t, 30*time.Second, "the consumers under way", func() bool { n, _ := count(); return n >= queues*perQueue/4 })
	ms[0].Stop()
	if !testwait.Until(30*time.Second, func() bool { _, proven := count(); return proven == queues*perQueue }) {
		// A lost ack leaves its message checked out to the consumer,
		// using up its prefetch: enough of them stall it.
		_, proven := count()
		t.Errorf("the consumers stalled with %d of %d acks read: their prefetch is held by messages whose acks were lost",
			proven, queues*perQueue)
	}
	for _, ch := range chans {
		ch.Close()
	}
	wg.Wait()
	mu.Lock()
	if len(again) > 0 {
		t.Errorf("%d messages delivered again after their acks were read: %v", len(again), again)
	}
	mu.Unlock()
	check := ms[2].Channel()
	for q := range queues {
		name := fmt.Sprintf("acked%d", q)
		var st amqp091.Queue
		testwait.For(t, 30*time.Second, "the consumers of "+name+" gone", func() bool {
			var err error
			st, err = check.QueueDeclarePassive(name, true, false, false, false, quorum)
			return err == nil && st.Consumers == 0
		})
		if st.Messages != 0 {
			t.Errorf("%s: %d messages left in the queue once every one was acked or the consumers stalled", name, st.Messages)
		}
	}
}
