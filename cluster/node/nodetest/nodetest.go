// Package nodetest starts in-process Warren clusters for tests: real
// nodes with real gossip, gRPC and Raft on loopback ports.
package nodetest

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/node"
)

// Member is one node of an in-process test cluster: real gossip, real
// gRPC, real Raft, on loopback ports.
type Member struct {
	*node.Node
	t   *testing.T
	cfg node.Config
}

// StartCluster starts n nodes that form a new cluster, and waits until
// every one of them serves clients.
func StartCluster(t *testing.T, n int, opts ...Option) []*Member {
	t.Helper()
	var ms []*Member
	var seed string
	for i := 0; i < n; i++ {
		m := newMember(t, fmt.Sprintf("warren-%d", i), n, seed, opts...)
		m.Start()
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

// AddNode starts a node named name that joins the existing cluster
// through seed (a gossip address or DNS name with port), as an operator
// adds one later (--bootstrap-expect 0), and waits until it serves
// clients.
func AddNode(t *testing.T, name, seed string, opts ...Option) *Member {
	t.Helper()
	m := newMember(t, name, 0, seed, opts...)
	m.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// Option changes a test node's cluster settings before it starts.
type Option func(*node.ClusterConfig)

func newMember(t *testing.T, name string, expect int, seed string, opts ...Option) *Member {
	out := logOutput(t)
	cfg := node.Config{
		DataDir:  t.TempDir(),
		AMQPAddr: FreeAddr(t),
		Log:      slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name),
		Broker:   broker.Config{Seed: broker.DefaultSeed()},
		Cluster: &node.ClusterConfig{
			NodeName:         name,
			InternalAddr:     FreeAddr(t),
			GossipAddr:       FreeAddr(t),
			BootstrapExpect:  expect,
			HeartbeatTimeout: 500 * time.Millisecond,
			ElectionTimeout:  500 * time.Millisecond,
			// The queue groups' timeout the node tests' time limits were
			// set against (the default was 10 s until it went to 30 s);
			// the default itself is exercised by cmd/warren's process
			// tests.
			QueueTimeout:   10 * time.Second,
			PublishTimeout: 10 * time.Second,
			ProbeInterval:  200 * time.Millisecond,
			ProbeTimeout:   100 * time.Millisecond,
		},
	}
	if seed != "" {
		cfg.Cluster.Join = []string{seed}
	}
	for _, o := range opts {
		o(cfg.Cluster)
	}
	if cfg.Cluster.TLS != nil {
		// A cluster with TLS between its nodes serves AMQPS as well.
		cfg.AMQPSAddr = FreeAddr(t)
		cfg.AMQPTLS = cfg.Cluster.TLS.ServerConfig(tls.VerifyClientCertIfGiven)
	}
	return &Member{t: t, cfg: cfg}
}

// Start starts (or restarts, on the same data and ports) the node.
func (m *Member) Start() {
	m.t.Helper()
	n, err := node.Start(m.cfg)
	if err != nil {
		m.t.Fatalf("start node: %v", err)
	}
	m.Node = n
	// Keep the ports across restarts.
	m.cfg.AMQPAddr = n.AMQPAddr().String()
	if a := n.AMQPSAddr(); a != nil {
		m.cfg.AMQPSAddr = a.String()
	}
	m.cfg.Cluster.InternalAddr = n.InternalAddr().String()
	m.cfg.Cluster.GossipAddr = n.GossipAddr()
	m.t.Cleanup(m.Stop)
}

// Stop closes the node, as a graceful shutdown does.
func (m *Member) Stop() {
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

// Dial connects as guest.
func (m *Member) Dial() *amqp091.Connection {
	m.t.Helper()
	c, err := amqp091.Dial(fmt.Sprintf("amqp://guest:guest@%s/", m.AMQPAddr()))
	if err != nil {
		m.t.Fatalf("dial %s: %v", m.Name(), err)
	}
	m.t.Cleanup(func() { c.Close() })
	return c
}

// Channel opens a channel on a new connection.
func (m *Member) Channel() *amqp091.Channel {
	m.t.Helper()
	ch, err := m.Dial().Channel()
	if err != nil {
		m.t.Fatal(err)
	}
	return ch
}

// DataDir is the node's data directory.
func (m *Member) DataDir() string { return m.cfg.DataDir }

// Reconfigure changes the node's cluster settings for its next Start (a
// restart on a new build, for instance).
func (m *Member) Reconfigure(o Option) { o(m.cfg.Cluster) }

// NewMember prepares, without starting it, a node named name that joins
// through seed (Start starts it): for a node that is expected not to
// become ready, such as one the cluster refuses.
func NewMember(t *testing.T, name, seed string, opts ...Option) *Member {
	t.Helper()
	return newMember(t, name, 0, seed, opts...)
}
