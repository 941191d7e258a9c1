package server_test

import (
	"strings"
	"testing"

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
	e := wantCode(t, err, 541)
	if !strings.HasPrefix(e.Reason, "INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated.") {
		t.Fatalf("reason %q", e.Reason)
	}
	if !conn.IsClosed() {
		t.Fatal("541 must close the connection")
	}
}
