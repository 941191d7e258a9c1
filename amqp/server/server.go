// Package server accepts AMQP 0-9-1 connections and carries out their
// methods against the node's broker: the handshake, channels, publishing
// with confirms, consuming with acknowledgements, and the protocol's
// error handling.
//
// A conn (conn.go) owns the socket, the handshake (handshake.go) and its
// channels; its outbox (outbox.go) is what the writer goroutine sends. A
// channel (channel.go) owns its life and its consuming side (consume.go,
// flow.go, unacked.go): the consumers, delivery tags and unacknowledged
// deliveries. Its other concerns are parts of it that own their fields:
// the publisher (publish.go, with confirms.go's tracker), the
// transaction (tx.go) and the topology methods (topology.go). Direct
// reply-to's registry of reply consumers is the Server's (replyto.go).
//
// Concurrency (who owns what, and the lock order) is written down in
// locking.md beside this file.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
)

// Config is the protocol layer's settings.
type Config struct {
	// ChannelMax, FrameMax and Heartbeat are offered in connection.tune.
	ChannelMax uint16
	FrameMax   uint32
	Heartbeat  time.Duration
	// HandshakeTimeout bounds the time from accept to connection.open.
	HandshakeTimeout time.Duration
	// MaxMessageSize bounds a message body; larger publishes close the
	// channel with 406.
	MaxMessageSize uint64
	// Product and Version go into connection.start's server properties.
	Product, Version string
	// ClusterName is reported in server properties.
	ClusterName string
	// ConnectionMax and ChannelMaxPerNode bound the node's client
	// connections and their channels (RabbitMQ's connection_max and
	// channel_max_per_node); 0 is no bound.
	ConnectionMax, ChannelMaxPerNode int
	// PermitGlobalQos makes basic.qos with global set one prefetch limit
	// shared by the channel's consumers, as RabbitMQ before 4.3 (quorum
	// queues refuse such consumers, 540). Off, as RabbitMQ 4.3 denies the
	// deprecated global_qos by default, global is ignored: the limit is
	// per consumer.
	PermitGlobalQos bool
	// MaxHandshakes caps the connections in their handshake at once (not
	// yet logged in); one accepted over it is closed at once. 0: no cap.
	MaxHandshakes int
	// LoginFailureDelay is the first wait a source address's login gets
	// after one of its logins failed; it doubles with each further
	// failure, up to 5 s (guard.go). 0 turns the slowing off.
	LoginFailureDelay time.Duration
	// CertLoginFrom is the part of a client certificate EXTERNAL takes
	// the user name from (RabbitMQ's ssl_cert_login_from).
	CertLoginFrom LoginFrom
}

// Defaults of the hostile-client bounds (guard.go).
const (
	DefaultMaxHandshakes     = 1024
	DefaultLoginFailureDelay = 250 * time.Millisecond
)

// DefaultConfig has RabbitMQ's defaults.
func DefaultConfig() Config {
	return Config{
		ChannelMax:        wire.DefaultChannelMax,
		FrameMax:          wire.DefaultFrameMax,
		Heartbeat:         60 * time.Second,
		HandshakeTimeout:  10 * time.Second,
		MaxMessageSize:    16 << 20,
		MaxHandshakes:     DefaultMaxHandshakes,
		LoginFailureDelay: DefaultLoginFailureDelay,
		CertLoginFrom:     LoginFromCommonName,
		Product:           "Warren",
		Version:           "0.1.0",
		ClusterName:       "warren",
	}
}

// Server accepts AMQP connections.
type Server struct {
	cfg    Config
	broker *broker.Broker
	log    *slog.Logger

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closing   bool
	suspended bool // maintenance mode: new connections are refused (suspend.go)
	// countAll counts a vhost's or a user's clients across the cluster
	// (SetClientCounter); nil on a node of its own.
	countAll func(vhost, user string) ClientCount
	wg       sync.WaitGroup

	replies replyRegistry // direct reply-to consumers (replyto.go)

	handshakes handshakeGuard // guard.go
	logins     loginThrottle
	refusedLog atomic.Int64 // unix nanos of the last "over the handshake cap" warning
	relay      atomic.Pointer[ReplyRelay]

	// For Counters (counters.go), under mu: connections opened and
	// closed, and the counts of the closed ones.
	opened, closedConns uint64
	closed              counters
}

// New returns a server for b.
func New(cfg Config, b *broker.Broker, log *slog.Logger) *Server {
	def := DefaultConfig()
	if cfg.ChannelMax == 0 {
		cfg.ChannelMax = def.ChannelMax
	}
	if cfg.FrameMax == 0 {
		cfg.FrameMax = def.FrameMax
	}
	if cfg.FrameMax < wire.FrameMinSize {
		cfg.FrameMax = wire.FrameMinSize
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = def.HandshakeTimeout
	}
	if cfg.MaxMessageSize == 0 {
		cfg.MaxMessageSize = def.MaxMessageSize
	}
	if cfg.Product == "" {
		cfg.Product = def.Product
	}
	if cfg.Version == "" {
		cfg.Version = def.Version
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = def.ClusterName
	}
	if cfg.CertLoginFrom == "" {
		cfg.CertLoginFrom = def.CertLoginFrom
	}
	return &Server{
		cfg:       cfg,
		broker:    b,
		log:       log,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		replies:   replyRegistry{tag: nodeTag(b.NodeID())},
		logins:    loginThrottle{base: cfg.LoginFailureDelay},
	}
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("amqp server closed")

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	s.log.Info("accepting AMQP connections", "addr", ln.Addr().String())

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of file descriptors and the like: wait and retry
				// rather than spin or give up.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		backoff = 0
		if !s.handshakes.enter(s.cfg.MaxHandshakes) {
			nc.Close()
			s.warnHandshakeCap()
			continue
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			s.handshakes.leave()
			return ErrServerClosed
		}
		if s.suspended { // maintenance mode (suspend.go)
			s.mu.Unlock()
			nc.Close()
			s.handshakes.leave()
			continue
		}
		s.conns[c] = struct{}{}
		s.opened++
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.closedConns++
			s.closed.fold(&c.stats)
			s.mu.Unlock()
		}()
	}
}

// warnHandshakeCap logs, at most once a second, that connections are
// being closed for arriving over the handshake cap.
func (s *Server) warnHandshakeCap() {
	now := time.Now().UnixNano()
	last := s.refusedLog.Load()
	if now-last < int64(time.Second) || !s.refusedLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("closing new connections: too many connections are in their handshake",
		"max_handshakes", s.cfg.MaxHandshakes, "closed_so_far", s.handshakes.refused.Load())
}

// Shutdown stops accepting, closes every connection with 320
// CONNECTION_FORCED as RabbitMQ does on shutdown, and waits for them to
// finish or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for ln := range s.listeners {
		ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.forceClose(wire.Errorf(wire.ConnectionForced, "broker forced connection closure with reason 'shutdown'"))
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

// ClusterName is the cluster's name as clients are told it.
func (s *Server) ClusterName() string { return s.cfg.ClusterName }

// ConnectionCount is the number of open client connections.
func (s *Server) ConnectionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
