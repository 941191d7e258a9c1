package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/raftq/testwait"
)

// TestShutdownClosesBusyConnections stops the node while a client keeps
// its connection busy: the shutdown's close must reach the connection
// even when it arrives while the reader is between two frames.
func TestShutdownClosesBusyConnections(t *testing.T) {
	for i := range 10 {
		n := startNode(t)
		c := n.dial(t)
		closed := c.NotifyClose(make(chan *amqp091.Error, 1))
		ch := openChannel(t, c)
		declareQueue(t, ch, "q")
		busy := make(chan struct{})
		var calls atomic.Int64
		go func() {
			defer close(busy)
			for {
				if _, err := ch.QueueDeclarePassive("q", false, false, false, false, nil); err != nil {
					return
				}
				calls.Add(1)
			}
		}()
		testwait.For(t, 5*time.Second, "calls from the client", func() bool { return calls.Load() > int64(10*i) })
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := n.Node.Close(ctx)
		cancel()
		n.Node = nil
		if err != nil {
			t.Fatalf("round %d: close node: %v", i, err)
		}
		waitClose(t, closed, amqp091.ConnectionForced, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'")
		<-busy
	}
}
