package server_test

import (
	"errors"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestNodeConnectionAndChannelLimits: --connection-max refuses one
// connection more at connection.open, --channel-max-per-node closes the
// connection that opens one channel more than the node allows, each with
// RabbitMQ's 530 text; closing makes room again.
func TestNodeConnectionAndChannelLimits(t *testing.T) {
	tn := startNode(t, withServer(func(c *server.Config) { c.ConnectionMax, c.ChannelMaxPerNode = 2, 3 }))
	a, b := tn.dial(t), tn.dial(t)
	_, err := amqp091.Dial(tn.url("guest", "guest", "/"))
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != amqp091.NotAllowed || ae.Reason != "NOT_ALLOWED - connection refused: node connection limit (2) is reached" {
		t.Fatalf("a third connection: %v", err)
	}

	openChannel(t, a)
	openChannel(t, a)
	openChannel(t, b)
	closed := b.NotifyClose(make(chan *amqp091.Error, 1))
	if _, err := b.Channel(); err == nil {
		t.Fatal("a fourth channel on the node was opened")
	}
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp091.NotAllowed || e.Reason != "NOT_ALLOWED - number of channels opened on node '"+tn.Broker().NodeID()+"' has reached the maximum allowed limit of 3" {
			t.Fatalf("closed with %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection that opened a fourth channel stayed open")
	}
	// b's channel went with it: room for one more, and for a connection
	// once the node has finished closing b (the client sees the close
	// before the node has let go of the socket, so the room comes a
	// moment later, as with RabbitMQ's connection tracking).
	var c *amqp091.Connection
	testwait.For(t, 10*time.Second, "room for a connection after b was closed", func() bool {
		c, err = amqp091.Dial(tn.url("guest", "guest", "/"))
		return err == nil
	})
	t.Cleanup(func() { c.Close() })
	openChannel(t, c)
}
