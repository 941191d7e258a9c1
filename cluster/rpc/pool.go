// Package rpc holds the node's gRPC connections to its peers. Every
// internal conversation between two nodes (Raft traffic of every group,
// forwarded publishes and deliveries, metadata forwarding, admin calls)
// shares the same two connections per peer, whatever the number of
// queues: one for ordinary traffic and one for bulk transfers (snapshots),
// so that a large snapshot in flight cannot delay other groups'
// heartbeats behind it on one TCP stream.
package rpc

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// ErrClosed is returned once the pool is closed.
var ErrClosed = errors.New("rpc: pool closed")

// Pool dials peers lazily and keeps one connection of each kind per peer
// address.
type Pool struct {
	mu     sync.Mutex
	closed bool
	conns  map[key]*grpc.ClientConn
	opts   []grpc.DialOption
}

type key struct {
	addr string
	bulk bool
}

// Fixed flow-control windows, on both ends of every peer connection.
// With gRPC's default, a window sized by bandwidth-delay estimation, a
// receiver answers data arriving after a quiet spell with a PING to
// measure the round trip, and the sender acks it: two more writes and
// reads per message when messages are sparse, which is how Raft's
// heartbeats and a queue at a thousand messages a second arrive. A fixed
// window turns the estimation off. 4 MiB per stream holds several full
// AppendEntries batches in flight; windows are limits, not buffers.
const (
	streamWindow = 4 << 20
	connWindow   = 16 << 20
)

// NewPool returns an empty pool. Extra options are added to every dial
// (tests add none; TLS would go here).
func NewPool(opts ...grpc.DialOption) *Pool {
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Notice a dead peer within seconds even when no call is made.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
		// Reconnect to a peer that comes back within a second or two,
		// not gRPC's default of up to two minutes: failover and restarts
		// wait on it.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
	}
	return &Pool{conns: make(map[key]*grpc.ClientConn), opts: append(base, opts...)}
}

// Conn is the connection for ordinary traffic to the peer at addr (its
// internal address, host:port).
func (p *Pool) Conn(addr string) (*grpc.ClientConn, error) { return p.get(key{addr, false}) }

// Bulk is the connection for large transfers (snapshots) to addr.
func (p *Pool) Bulk(addr string) (*grpc.ClientConn, error) { return p.get(key{addr, true}) }

func (p *Pool) get(k key) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if c, ok := p.conns[k]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(k.addr, p.opts...)
	if err != nil {
		return nil, fmt.Errorf("rpc: dial %s: %w", k.addr, err)
	}
	p.conns[k] = c
	return c, nil
}

// Len is the number of peer connections the pool holds, for tests and
// for operators (a node should hold at most two per peer).
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.closed = true
	p.mu.Unlock()
	var errs []error
	for _, c := range conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// ServerOptions are the options every node's internal gRPC server uses,
// matching the pool's limits and keepalives.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(64 << 20),
		grpc.MaxSendMsgSize(64 << 20),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 2 * time.Second, PermitWithoutStream: true}),
		// The serving side notices a peer that went silently (a cut
		// link, a partition) as the dialling side does: without it, a
		// consume stream from a node cut off stayed open here until TCP
		// gave up, its consumer holding its messages and taking more,
		// rather than waiting out the consumer disconnected timeout
		// (forward's disconnected.go). Pings go only after 5 s with
		// nothing received.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 5 * time.Second, Timeout: 3 * time.Second}),
	}
}
