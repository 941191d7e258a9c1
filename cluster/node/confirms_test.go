package node_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
)

// TestConfirmNotHeldBehindAStalledQueue: one channel publishes to a quorum
// queue that has lost its majority, then to one that has not. As with
// RabbitMQ, the second is confirmed at once, on its own (out of sequence),
// not held until the first is answered; the first is nacked after the
// publish timeout.
func TestConfirmNotHeldBehindAStalledQueue(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3, func(c *node.ClusterConfig) { c.PublishTimeout = 6 * time.Second })
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("stalled", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("alone", true, false, false, false, amqp091.Table{
		"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(1), "x-queue-leader-locator": "client-local",
	}); err != nil {
		t.Fatal(err)
	}
	publishSome(t, ms[0], "stalled", 1)
	publishSome(t, ms[0], "alone", 1)
	ms[1].Kill()
	ms[2].Kill()

	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "stalled", false, false, amqp091.Publishing{Body: []byte("1")})
	if err != nil {
		t.Fatal(err)
	}
	second, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "alone", false, false, amqp091.Publishing{Body: []byte("2")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.Done():
		if !second.Acked() {
			t.Fatal("the publish to the queue that has its majority was nacked")
		}
	case <-time.After(4 * time.Second):
		t.Fatal("the publish to the queue that has its majority waited for the one that has not")
	}
	select {
	case <-first.Done():
		if first.Acked() {
			t.Fatal("the publish to the queue without a majority was confirmed")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the publish to the queue without a majority was never answered")
	}
}
