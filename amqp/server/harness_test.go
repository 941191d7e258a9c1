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

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
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
		AMQPAddr: nodetest.FreeAddr(t), // kept across restarts: below the ephemeral range
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

// withServer adjusts the protocol layer's settings.
func withServer(f func(*server.Config)) nodeOption {
	return func(c *node.Config) { f(&c.Server) }
}

// withSeed replaces the users, vhosts and permissions created on first
// start.
func withSeed(s broker.Seed) nodeOption {
	return func(c *node.Config) { c.Broker.Seed = s }
}

// dialAs connects as user to vhost and closes the connection when the
// test ends.
func (tn *testNode) dialAs(t testing.TB, user, pass, vhost string) *amqp091.Connection {
	t.Helper()
	c, err := amqp091.Dial(tn.url(user, pass, vhost))
	if err != nil {
		t.Fatalf("dial as %s to %s: %v", user, vhost, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wantError fails unless err is an AMQP error with code and exactly the
// reply text.
func wantError(t testing.TB, err error, code int, text string) *amqp091.Error {
	t.Helper()
	ae := wantCode(t, err, code)
	if ae.Reason != text {
		t.Fatalf("got reply text %q, want %q", ae.Reason, text)
	}
	return ae
}

// notifyClose registers for the channel's closing error. It must be
// called before the error happens.
func notifyClose(ch *amqp091.Channel) <-chan *amqp091.Error {
	return ch.NotifyClose(make(chan *amqp091.Error, 1))
}

// waitClose waits for a server-initiated close reported on c and checks
// its code and, unless empty, its text.
func waitClose(t testing.TB, c <-chan *amqp091.Error, code int, text string) *amqp091.Error {
	t.Helper()
	select {
	case e, ok := <-c:
		if !ok || e == nil {
			t.Fatalf("closed without an error, want %d %q", code, text)
		}
		if e.Code != code || (text != "" && e.Reason != text) {
			t.Fatalf("closed with %d %q, want %d %q", e.Code, e.Reason, code, text)
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatalf("not closed within 5s, want %d %q", code, text)
	}
	return nil
}

// declareQueue declares a transient (classic) queue.
func declareQueue(t testing.TB, ch *amqp091.Channel, name string) amqp091.Queue {
	t.Helper()
	q, err := ch.QueueDeclare(name, false, false, false, false, nil)
	if err != nil {
		t.Fatalf("declare queue %q: %v", name, err)
	}
	return q
}

// publish publishes body and fails the test on a client-side error.
func publish(t testing.TB, ch *amqp091.Channel, exchange, key string, p amqp091.Publishing) {
	t.Helper()
	if err := ch.PublishWithContext(context.Background(), exchange, key, false, false, p); err != nil {
		t.Fatalf("publish to %q/%q: %v", exchange, key, err)
	}
}

// publishBody publishes a text body.
func publishBody(t testing.TB, ch *amqp091.Channel, exchange, key, body string) {
	t.Helper()
	publish(t, ch, exchange, key, amqp091.Publishing{Body: []byte(body)})
}

// drainQueue takes every ready message from q with basic.get (no-ack) and
// returns their bodies in order. Publishes made earlier on the same
// channel are routed before the gets are served, so no waiting is needed.
func drainQueue(t testing.TB, ch *amqp091.Channel, q string) []string {
	t.Helper()
	var bodies []string
	for {
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatalf("get from %q: %v", q, err)
		}
		if !ok {
			return bodies
		}
		bodies = append(bodies, string(d.Body))
	}
}

// queueExists reports whether a passive declare finds the queue, using a
// channel of its own (a 404 closes it). Another connection's exclusive
// queue (405) exists too.
func queueExists(t testing.TB, c *amqp091.Connection, name string) bool {
	t.Helper()
	ch := openChannel(t, c)
	_, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
	if err == nil {
		ch.Close()
		return true
	}
	if amqpCode(err) == amqp091.ResourceLocked {
		return true
	}
	wantCode(t, err, amqp091.NotFound)
	return false
}

// barrier makes a round trip on ch: the server handles a channel's
// frames in order, so everything published on ch before is routed and
// stored once it returns. Publishes on one connection are ordered with
// every channel of that connection; across connections they need this.
func barrier(t testing.TB, ch *amqp091.Channel) {
	t.Helper()
	if err := ch.ExchangeDeclarePassive("amq.direct", "direct", true, false, false, false, nil); err != nil {
		t.Fatalf("barrier: %v", err)
	}
}

// exchangeExists is queueExists for exchanges.
func exchangeExists(t testing.TB, c *amqp091.Connection, name string) bool {
	t.Helper()
	ch := openChannel(t, c)
	err := ch.ExchangeDeclarePassive(name, "direct", false, false, false, false, nil)
	if err == nil {
		ch.Close()
		return true
	}
	wantCode(t, err, amqp091.NotFound)
	return false
}
