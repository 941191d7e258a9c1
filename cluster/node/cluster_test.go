package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/node"
)

// member is one node of an in-process test cluster: real gossip, real
// gRPC, real Raft, on loopback ports.
type member struct {
	*node.Node
	t   *testing.T
	cfg node.Config
}

// startCluster starts n nodes that form a new cluster, and waits until
// every one of them serves clients.
func startCluster(t *testing.T, n int) []*member {
	t.Helper()
	var out io.Writer = io.Discard
	if os.Getenv("WARREN_TEST_LOG") != "" {
		out = os.Stderr
	}
	var ms []*member
	var seed string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("warren-%d", i)
		cfg := node.Config{
			DataDir:  t.TempDir(),
			AMQPAddr: "127.0.0.1:0",
			Log:      slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name),
			Broker:   broker.Config{Seed: broker.DefaultSeed()},
			Cluster: &node.ClusterConfig{
				NodeName:         name,
				InternalAddr:     "127.0.0.1:0",
				GossipAddr:       "127.0.0.1:0",
				BootstrapExpect:  n,
				HeartbeatTimeout: 500 * time.Millisecond,
				ElectionTimeout:  500 * time.Millisecond,
				PublishTimeout:   10 * time.Second,
				ProbeInterval:    200 * time.Millisecond,
				ProbeTimeout:     100 * time.Millisecond,
			},
		}
		if seed != "" {
			cfg.Cluster.Join = []string{seed}
		}
		m := &member{t: t, cfg: cfg}
		m.start()
		if seed == "" {
			seed = m.GossipAddr()
		}
		ms = append(ms, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range ms {
		if err := m.Ready(ctx); err != nil {
			t.Fatalf("%s: %v", m.Name(), err)
		}
	}
	return ms
}

func (m *member) start() {
	m.t.Helper()
	n, err := node.Start(m.cfg)
	if err != nil {
		m.t.Fatalf("start node: %v", err)
	}
	m.Node = n
	// Keep the ports across restarts.
	m.cfg.AMQPAddr = n.AMQPAddr().String()
	m.cfg.Cluster.InternalAddr = n.InternalAddr().String()
	m.cfg.Cluster.GossipAddr = n.GossipAddr()
	m.t.Cleanup(m.stop)
}

func (m *member) stop() {
	if m.Node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Node.Close(ctx); err != nil {
		m.t.Logf("close %s: %v", m.Name(), err)
	}
	m.Node = nil
}

func (m *member) dial() *amqp091.Connection {
	m.t.Helper()
	c, err := amqp091.Dial(fmt.Sprintf("amqp://guest:guest@%s/", m.AMQPAddr()))
	if err != nil {
		m.t.Fatalf("dial %s: %v", m.Name(), err)
	}
	m.t.Cleanup(func() { c.Close() })
	return c
}

func (m *member) channel() *amqp091.Channel {
	m.t.Helper()
	ch, err := m.dial().Channel()
	if err != nil {
		m.t.Fatal(err)
	}
	return ch
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var quorum = amqp091.Table{"x-queue-type": "quorum"}

// leaderOf finds the node whose replica leads the only queue declared so
// far, by the count each node leads.
func leaderIndex(t *testing.T, ms []*member) int {
	t.Helper()
	idx := -1
	eventually(t, "a queue leader", 15*time.Second, func() bool {
		for i, m := range ms {
			if m.Node != nil && m.LeadingQueues() == 1 {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

// TestPublishConsumeAcrossNodes: a client publishes with confirms on one
// node to a queue led by another and consumes on a third.
func TestPublishConsumeAcrossNodes(t *testing.T) {
	ms := startCluster(t, 3)
	decl := ms[0].channel()
	if _, err := decl.QueueDeclare("orders", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	lead := leaderIndex(t, ms)
	pubNode, subNode := ms[(lead+1)%3], ms[(lead+2)%3]

	pub := pubNode.channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 1000))
	const n = 500
	for i := 0; i < n; i++ {
		err := pub.PublishWithContext(context.Background(), "", "orders", false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, Body: []byte(fmt.Sprintf("order-%d", i)),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatalf("publish %d nacked", c.DeliveryTag)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d confirms", i, n)
		}
	}

	sub := subNode.channel()
	if err := sub.Qos(50, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := sub.Consume("orders", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		select {
		case d := <-deliveries:
			if want := fmt.Sprintf("order-%d", i); string(d.Body) != want {
				t.Fatalf("got %q, want %q", d.Body, want)
			}
			d.Ack(false)
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d deliveries", i, n)
		}
	}
	eventually(t, "acks to reach the leader", 10*time.Second, func() bool {
		q, err := ms[lead].channel().QueueDeclarePassive("orders", true, false, false, false, quorum)
		return err == nil && q.Messages == 0
	})
}

// TestMetadataReplicated: exchanges and bindings declared through one node
// route publishes made on another.
func TestMetadataReplicated(t *testing.T) {
	ms := startCluster(t, 3)
	ch := ms[1].channel()
	if err := ch.ExchangeDeclare("events", "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("audit", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("audit", "user.*", "events", false, nil); err != nil {
		t.Fatal(err)
	}
	pub := ms[2].channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the exchange on node 2", 10*time.Second, func() bool {
		c := ms[2].channel()
		return c.ExchangeDeclarePassive("events", "topic", true, false, false, false, nil) == nil
	})
	returns := pub.NotifyReturn(make(chan amqp091.Return, 100))
	eventually(t, "the binding to route on node 2", 10*time.Second, func() bool {
		dc, err := pub.PublishWithDeferredConfirmWithContext(context.Background(), "events", "user.created", true, false, amqp091.Publishing{Body: []byte("u1")})
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			return false
		}
		select {
		case <-returns: // unroutable: the binding has not arrived yet
			return false
		default:
			return true
		}
	})
	// The binding routes: the message is in the queue, seen from node 0.
	get := ms[0].channel()
	eventually(t, "the routed message", 10*time.Second, func() bool {
		d, ok, err := get.Get("audit", true)
		return err == nil && ok && string(d.Body) == "u1"
	})
}

// TestLeaderPlacement: 30 queues declared through one node are led 10 ± 1
// per node; client-local ones are led by the declaring node.
func TestLeaderPlacement(t *testing.T) {
	ms := startCluster(t, 3)
	ch := ms[0].channel()
	for i := 0; i < 30; i++ {
		if _, err := ch.QueueDeclare(fmt.Sprintf("q%d", i), true, false, false, false, quorum); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "30 leaders spread 10 ± 1", 30*time.Second, func() bool {
		total := 0
		for _, m := range ms {
			l := m.LeadingQueues()
			total += l
			if l < 9 || l > 11 {
				return false
			}
		}
		return total == 30
	})
	local := ms[2].channel()
	for i := 0; i < 5; i++ {
		args := amqp091.Table{"x-queue-type": "quorum", "x-queue-leader-locator": "client-local"}
		if _, err := local.QueueDeclare(fmt.Sprintf("local%d", i), true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "client-local queues led by the declaring node", 30*time.Second, func() bool {
		return ms[2].LeadingQueues() >= 15 && ms[0].LeadingQueues()+ms[1].LeadingQueues()+ms[2].LeadingQueues() == 35
	})
}

// TestInternalConnectionsFixed: a node holds as many connections to its
// peers with 100 queues as with 1.
func TestInternalConnectionsFixed(t *testing.T) {
	ms := startCluster(t, 3)
	ch := ms[0].channel()
	if _, err := ch.QueueDeclare("one", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	publishSome(t, ms[1], "one", 10)
	one := make([]int, len(ms))
	for i, m := range ms {
		one[i] = m.PeerConnections()
	}
	for i := 0; i < 99; i++ {
		if _, err := ch.QueueDeclare(fmt.Sprintf("many%d", i), true, false, false, false, quorum); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 99; i += 10 {
		publishSome(t, ms[2], fmt.Sprintf("many%d", i), 5)
	}
	for i, m := range ms {
		if got := m.PeerConnections(); got > 4 || got > max(one[i], 4) {
			t.Errorf("%s holds %d peer connections with 100 queues (%d with 1); want at most 2 per peer", m.Name(), got, one[i])
		}
	}
}

func publishSome(t *testing.T, m *member, q string, n int) {
	t.Helper()
	ch := m.channel()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, false, false, amqp091.Publishing{Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !dc.Wait() {
				t.Errorf("publish to %s nacked", q)
			}
		}()
	}
	wg.Wait()
}
