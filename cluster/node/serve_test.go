package node_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestNoClientsBeforeCaughtUp: a restarted cluster member serves clients
// only once it has caught up with the cluster's metadata, as RabbitMQ
// listens only once booted. Restarted alone (the other two down, so no
// metadata leader), it used to log clients in from its last snapshot,
// which may hold users, permissions and bindings deleted since; now their
// connections wait, and go through once a majority is back.
func TestNoClientsBeforeCaughtUp(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	for _, m := range ms {
		m.Stop()
	}
	ms[0].Start()
	url := fmt.Sprintf("amqp://guest:guest@%s/", ms[0].AMQPAddr())
	c, err := amqp091.DialConfig(url, amqp091.Config{Dial: amqp091.DefaultDial(2 * time.Second)})
	if err == nil {
		c.Close()
		t.Fatal("a node without a metadata leader logged a client in")
	}
	// amqp091 reports the handshake's read timing out as a frame error.
	if !strings.Contains(err.Error(), "i/o timeout") {
		t.Fatalf("dial a node that is not ready: %v, want a timeout", err)
	}

	ms[1].Start()
	testwait.For(t, 30*time.Second, "a login once a majority is back", func() bool {
		c, err := amqp091.Dial(url)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}
