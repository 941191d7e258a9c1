package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/node"
)

// testNode starts a node on a free loopback port with its data in a
// temporary directory, and stops it when the test ends.
type testNode struct {
	*node.Node
	t   testing.TB
	cfg node.Config
}

type nodeOption func(*node.Config)

func startNode(t testing.TB, opts ...nodeOption) *testNode {
	t.Helper()
	var logOut io.Writer = io.Discard
	if os.Getenv("WARREN_TEST_LOG") != "" {
		logOut = os.Stderr
	}
	cfg := node.Config{
		DataDir:  t.TempDir(),
		AMQPAddr: "127.0.0.1:0",
		Log:      slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Broker:   broker.Config{Seed: broker.DefaultSeed()},
	}
	for _, o := range opts {
		o(&cfg)
	}
	tn := &testNode{t: t, cfg: cfg}
	tn.start()
	return tn
}

func (tn *testNode) start() {
	tn.t.Helper()
	n, err := node.Start(tn.cfg)
	if err != nil {
		tn.t.Fatalf("start node: %v", err)
	}
	tn.Node = n
	// Keep the port across restarts so clients can reconnect.
	tn.cfg.AMQPAddr = n.AMQPAddr().String()
	tn.t.Cleanup(func() { tn.stop() })
}

func (tn *testNode) stop() {
	if tn.Node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tn.Node.Close(ctx); err != nil {
		tn.t.Errorf("close node: %v", err)
	}
	tn.Node = nil
}

// restart stops the node and starts it again on the same data and port.
func (tn *testNode) restart() {
	tn.t.Helper()
	tn.stop()
	tn.start()
}

func (tn *testNode) url(user, pass, vhost string) string {
	if vhost == "/" {
		vhost = "%2F"
	}
	return fmt.Sprintf("amqp://%s:%s@%s/%s", user, pass, tn.AMQPAddr(), vhost)
}

func (tn *testNode) dial(t testing.TB) *amqp091.Connection {
	t.Helper()
	c, err := amqp091.Dial(tn.url("guest", "guest", "/"))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func openChannel(t testing.TB, c *amqp091.Connection) *amqp091.Channel {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	return ch
}

// amqpCode returns the reply code of an amqp091 error, or 0.
func amqpCode(err error) int {
	var ae *amqp091.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

// wantCode fails unless err is an AMQP error with code.
func wantCode(t testing.TB, err error, code int) *amqp091.Error {
	t.Helper()
	var ae *amqp091.Error
	if !errors.As(err, &ae) {
		t.Fatalf("got error %v, want AMQP error %d", err, code)
	}
	if ae.Code != code {
		t.Fatalf("got AMQP error %d %q, want code %d", ae.Code, ae.Reason, code)
	}
	return ae
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: "+format, args...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// receive waits for one delivery.
func receive(t testing.TB, d <-chan amqp091.Delivery) amqp091.Delivery {
	t.Helper()
	select {
	case m, ok := <-d:
		if !ok {
			t.Fatal("delivery channel closed")
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery within 5s")
	}
	return amqp091.Delivery{}
}

// noDelivery checks that nothing arrives for a short while.
func noDelivery(t testing.TB, d <-chan amqp091.Delivery) {
	t.Helper()
	select {
	case m := <-d:
		t.Fatalf("unexpected delivery %q", m.Body)
	case <-time.After(100 * time.Millisecond):
	}
}
