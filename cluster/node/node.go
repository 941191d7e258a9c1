// Package node assembles one Warren node: its metadata store, the broker
// model and the AMQP listener. cmd/warren runs one; tests start several in
// one process.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/metadata"
)

// Config is everything a node needs.
type Config struct {
	// DataDir holds the node's files; it is created if missing.
	DataDir string
	// AMQPAddr is the AMQP listen address, e.g. ":5672" or
	// "127.0.0.1:0" for a free port.
	AMQPAddr string
	Server   server.Config
	Broker   broker.Config
	Log      *slog.Logger
}

// Node is a running node.
type Node struct {
	cfg    Config
	log    *slog.Logger
	store  metadata.Store
	broker *broker.Broker
	server *server.Server
	ln     net.Listener

	served   chan struct{} // closed when Serve returns
	serveErr error
}

// Start opens the node's data and starts listening.
func Start(cfg Config) (*Node, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if cfg.Broker.DataDir == "" {
		cfg.Broker.DataDir = cfg.DataDir
	}
	store, err := metadata.OpenBolt(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	b, err := broker.New(cfg.Broker, store, log.With("component", "broker"))
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("start broker: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.AMQPAddr)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("listen for AMQP on %s: %w", cfg.AMQPAddr, err)
	}
	n := &Node{
		cfg:    cfg,
		log:    log,
		store:  store,
		broker: b,
		server: server.New(cfg.Server, b, log.With("component", "amqp")),
		ln:     ln,
		served: make(chan struct{}),
	}
	go func() {
		n.serveErr = n.server.Serve(ln)
		close(n.served)
	}()
	return n, nil
}

// AMQPAddr is the address the node listens on.
func (n *Node) AMQPAddr() net.Addr { return n.ln.Addr() }

// Broker is the node's broker model.
func (n *Node) Broker() *broker.Broker { return n.broker }

// Done is closed when the node stops accepting connections.
func (n *Node) Done() <-chan struct{} { return n.served }

// Close closes client connections, waits for them within ctx, and closes
// the node's data.
func (n *Node) Close(ctx context.Context) error {
	err := n.server.Shutdown(ctx)
	<-n.served
	if n.serveErr != nil && !errors.Is(n.serveErr, server.ErrServerClosed) {
		err = errors.Join(err, n.serveErr)
	}
	return errors.Join(err, n.broker.Close())
}
