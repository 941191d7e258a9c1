package server_test

import (
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/node"
)

// TestTransientQueuesSwitch: Warren accepts non-durable, non-exclusive
// queues by default (RabbitMQ before 4.3); with the switch it refuses
// them as RabbitMQ 4.3 does, while exclusive and durable queues still work.
func TestTransientQueuesSwitch(t *testing.T) {
	permit := startNode(t)
	if _, err := openChannel(t, permit.dial(t)).QueueDeclare("t", false, false, false, false, nil); err != nil {
		t.Fatalf("transient queue refused by default: %v", err)
	}

	deny := startNode(t, func(c *node.Config) { c.Broker.DenyTransientQueues = true })
	conn := deny.dial(t)
	ch := openChannel(t, conn)
	if _, err := ch.QueueDeclare("durable", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("", false, false, true, false, nil); err != nil {
		t.Fatalf("exclusive queue refused: %v", err)
	}
	_, err := ch.QueueDeclare("t", false, false, false, false, nil)
	wantDenied(t, conn, err, "INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated.")
}

// TestQueueMasterLocatorSwitch: the deprecated x-queue-master-locator
// argument and queue-master-locator policy key are accepted by default
// (RabbitMQ before 4.3); with the switch a classic queue declared with the
// argument closes the connection with 541, and a policy with the key is
// refused, as in RabbitMQ 4.3.
func TestQueueMasterLocatorSwitch(t *testing.T) {
	args := amqp091.Table{"x-queue-type": "classic", "x-queue-master-locator": "min-masters"}
	policy := broker.PolicyDef{Vhost: "/", Name: "loc", Pattern: "^loc", ApplyTo: broker.ApplyToQueues,
		Definition: map[string]any{"queue-master-locator": "client-local"}}

	permit := startNode(t)
	if _, err := openChannel(t, permit.dial(t)).QueueDeclare("loc", true, false, false, false, args); err != nil {
		t.Fatalf("x-queue-master-locator refused by default: %v", err)
	}
	if err := permit.Broker().SetPolicy(policy); err != nil {
		t.Fatalf("queue-master-locator policy refused by default: %v", err)
	}

	deny := startNode(t, func(c *node.Config) { c.Broker.DenyQueueMasterLocator = true })
	conn := deny.dial(t)
	ch := openChannel(t, conn)
	if _, err := ch.QueueDeclare("plain", true, false, false, false, amqp091.Table{"x-queue-type": "classic"}); err != nil {
		t.Fatal(err)
	}
	_, err := ch.QueueDeclare("loc", true, false, false, false, args)
	wantDenied(t, conn, err, "INTERNAL_ERROR - Feature `queue_master_locator` is deprecated.\nBy default, this feature is not permitted anymore.")
	if queueExists(t, deny.dial(t), "loc") {
		t.Fatal("a refused declaration created the queue")
	}
	err = deny.Broker().SetPolicy(policy)
	if want := "use of deprecated queue-master-locator argument is not permitted"; err == nil || err.Error() != want {
		t.Fatalf("policy: got %v, want %q", err, want)
	}
}

// wantDenied checks err is RabbitMQ 4.3's refusal of a deprecated feature:
// 541 with a reason starting with prefix, and conn closed by it.
func wantDenied(t *testing.T, conn *amqp091.Connection, err error, prefix string) {
	t.Helper()
	e := wantCode(t, err, 541)
	if !strings.HasPrefix(e.Reason, prefix) {
		t.Fatalf("reason %q", e.Reason)
	}
	if !conn.IsClosed() {
		t.Fatal("541 must close the connection")
	}
}
