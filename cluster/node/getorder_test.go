package node_test

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
)

// TestGetAfterNackThroughAnotherNode: on a channel of a node that is not
// the quorum queue's leader, basic.get, basic.nack with requeue, then
// basic.get again returns the nacked message, redelivered, as RabbitMQ's
// channel orders the two. The nack's settlement travels apart from the
// get (the owned settler); the second get used to overtake it about one
// time in twenty.
func TestGetAfterNackThroughAnotherNode(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	args := amqp091.Table{"x-queue-type": "quorum", "x-queue-leader-locator": "client-local"}
	if _, err := ms[0].Channel().QueueDeclare("gets", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	pub := ms[0].Channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	g := ms[1].Channel()
	for i := range 40 {
		for _, b := range []string{"a", "b"} {
			publishConfirmed(t, pub, "gets", b)
		}
		d, ok, err := g.Get("gets", false)
		if err != nil || !ok || string(d.Body) != "a" {
			t.Fatalf("round %d: first get %q %v %v", i, d.Body, ok, err)
		}
		if err := d.Nack(false, true); err != nil {
			t.Fatal(err)
		}
		d, ok, err = g.Get("gets", true)
		if err != nil || !ok || string(d.Body) != "a" || !d.Redelivered {
			t.Fatalf("round %d: the get after the nack returned %q (redelivered %v, ok %v, err %v), not the nacked message", i, d.Body, d.Redelivered, ok, err)
		}
		if _, err := g.QueuePurge("gets", false); err != nil {
			t.Fatal(err)
		}
	}
}
