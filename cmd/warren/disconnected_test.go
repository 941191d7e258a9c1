package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestClusterConsumerDisconnectedTimeout: RabbitMQ 4.3's consumer
// disconnected timeout, through a real partition. A consumer's node is cut
// off from the queues' leaders while it holds messages unacknowledged.
// Where the queue's timeout is long, the messages wait for it: no other
// consumer gets them while the node is cut off, and once the partition
// heals its consumer acknowledges them and they are gone, never handed
// out again. Where it is short, they return to the queue once it has
// passed, and another consumer gets them, redelivered.
func TestClusterConsumerDisconnectedTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster process test")
	}
	lab, c := startNetnsCluster(t)
	const long, short = 40 * time.Second, 2 * time.Second
	_, ch := c.nodes[0].channel(t)
	for name, timeout := range map[string]time.Duration{"kept": long, "returned": short} {
		if _, err := ch.QueueDeclare(name, true, false, false, false, amqp091.Table{
			"x-queue-type": "quorum", "x-consumer-disconnected-timeout": int64(timeout / time.Millisecond),
		}); err != nil {
			t.Fatal(err)
		}
	}
	kept, returned := queueLeader(t, c, "kept"), queueLeader(t, c, "returned")
	cut := 0
	for c.nodes[cut] == kept || c.nodes[cut] == returned {
		cut++
	}
	other := (cut + 1) % len(c.nodes)

	// The cut node's consumers take five messages of each queue and hold
	// them; the other node's consumers then wait for any.
	pub := confirmingChannel(t, kept)
	publishBodies(t, pub, "kept", "k", 5)
	publishBodies(t, pub, "returned", "r", 5)
	_, cutCh := c.nodes[cut].channel(t)
	if err := cutCh.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	held := map[string][]amqp091.Delivery{}
	for _, q := range []string{"kept", "returned"} {
		ds, err := cutCh.Consume(q, "holder-"+q, false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			held[q] = append(held[q], receiveWithin(t, ds, 10*time.Second, "a held "+q+" message"))
		}
	}
	_, otherCh := c.nodes[other].channel(t)
	others := map[string]<-chan amqp091.Delivery{}
	for _, q := range []string{"kept", "returned"} {
		ds, err := otherCh.Consume(q, "other-"+q, false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		others[q] = ds
	}

	lab.cut(cut)
	cutAt := time.Now()
	// The short timeout's messages come back to the queue and go to the
	// other consumer, redelivered; the leader notices the broken link
	// within its keepalive (8 s) or gossip's verdict.
	for range 5 {
		d := receiveWithin(t, others["returned"], 30*time.Second, "a returned message")
		if d.Body[0] != 'r' || !d.Redelivered {
			t.Fatalf("the other consumer got %q (redelivered %v), want a returned r message", d.Body, d.Redelivered)
		}
		d.Ack(false)
	}
	t.Logf("the short timeout's messages returned %v after the cut", time.Since(cutAt).Round(time.Second))
	// A new message of the kept queue goes to the other consumer: the
	// queue serves, and only the held ones are withheld.
	publishBodies(t, pub, "kept", "new", 1)
	if d := receiveWithin(t, others["kept"], 10*time.Second, "the new message"); string(d.Body) != "new0" {
		t.Fatalf("the other consumer got %q while the holder was cut off, want new0", d.Body)
	} else {
		d.Ack(false)
	}
	if time.Since(cutAt) > long*3/4 {
		t.Fatalf("too slow to test the long timeout: %v since the cut", time.Since(cutAt))
	}
	lab.heal(cut)

	// Back within the long timeout, the holder acknowledges what it held.
	for _, d := range held["kept"] {
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case d := <-others["kept"]:
		t.Fatalf("the other consumer got %q (redelivered %v): the held message was handed out again", d.Body, d.Redelivered)
	case <-time.After(time.Until(cutAt.Add(long + 5*time.Second))):
	}
	q, err := otherCh.QueueDeclarePassive("kept", true, false, false, false, nil)
	if err != nil || q.Messages != 0 {
		t.Fatalf("kept after the holder's acknowledgements: %+v %v", q, err)
	}
}

// confirmingChannel is a channel on nd in confirm mode.
func confirmingChannel(t *testing.T, nd *clusterNode) *amqp091.Channel {
	t.Helper()
	_, ch := nd.channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return ch
}

// publishBodies publishes n persistent messages prefix0..prefix(n-1) to
// queue and waits for their confirms.
func publishBodies(t *testing.T, ch *amqp091.Channel, queue, prefix string, n int) {
	t.Helper()
	for i := range n {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false,
			amqp091.Publishing{DeliveryMode: 2, Body: []byte(fmt.Sprintf("%s%d", prefix, i))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ok, err := dc.WaitContext(ctx)
		cancel()
		if err != nil || !ok {
			t.Fatalf("publish %s%d: confirmed %v, %v", prefix, i, ok, err)
		}
	}
}

// receiveWithin waits for one delivery.
func receiveWithin(t *testing.T, ds <-chan amqp091.Delivery, timeout time.Duration, what string) amqp091.Delivery {
	t.Helper()
	select {
	case d, ok := <-ds:
		if !ok {
			t.Fatalf("waiting for %s: the consumer was closed", what)
		}
		return d
	case <-time.After(timeout):
		t.Fatalf("no %s within %v", what, timeout)
	}
	return amqp091.Delivery{}
}
