// Package transport carries the Raft traffic of every group of a node
// (one group per quorum queue) over the node's one internal gRPC port.
//
// A Mux serves the Raft gRPC service and hands out one Transport per
// group; every request names its group and the serving Mux routes it to
// that group's Consumer channel. Outgoing calls go over the connections
// of an rpc.Pool, so a node holds the same two connections per peer node
// whether it carries one group or a thousand: ordinary calls and the
// AppendEntries pipelines on Pool.Conn, snapshots on Pool.Bulk, so that a
// large snapshot does not hold up other groups' heartbeats. The
// heartbeats of every group to one peer travel together (heartbeat.go).
//
// A Transport makes the group's outgoing calls itself and keeps the rest
// in parts that own their state: its inbox (inbox.go) hands incoming
// requests to raft, with raft's heartbeat handler and the lock that lets
// Close wait for a heartbeat in hand; its ackTracker (acks.go) records
// followers' acknowledgements; its catchUp (catchup.go) notes followers a
// replication call failed to reach and nudges the group when they answer
// again; its spareChooser (spare.go) holds the spare delay and the open
// pipelines that tell which followers keep up.
//
// Concurrency: Mux.mu guards the group table and the closed flag, Mux.hbMu
// the heartbeat senders; neither is held while calling into raft or the
// network, nor is a sender's own mutex. Each Transport owns
// its closing (done channel, client context); server handlers never block
// on a closed group.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/proto/raftpb"
)

const (
	// rpcTimeout bounds one request/response call, as NetworkTransport's
	// Timeout does. Dead peers are noticed sooner by the pool's keepalive.
	rpcTimeout = 10 * time.Second
	// snapshotTimeoutScale: an InstallSnapshot gets rpcTimeout per this
	// many bytes of snapshot (raft.DefaultTimeoutScale).
	snapshotTimeoutScale = raft.DefaultTimeoutScale
	// snapshotChunk is the size of one InstallSnapshot stream message.
	snapshotChunk = 256 << 10
)

// ErrClosed is returned by Mux.Transport once the Mux is closed.
var ErrClosed = errors.New("transport: mux closed")

// Mux multiplexes the Raft groups of one node over its gRPC server and
// its peer connection pool.
type Mux struct {
	local string
	pool  *rpc.Pool
	log   *slog.Logger

	mu     sync.RWMutex
	groups map[string]*Transport
	closed bool
	// registered is closed (and replaced) whenever a group registers,
	// for awaitGroup.
	registered chan struct{}
	// groupWait is defaultGroupWait; tests shorten it.
	groupWait atomic.Int64

	// hbMu guards hb, the heartbeat senders to each peer node.
	hbMu sync.Mutex
	hb   map[hbKey]*peerHeartbeats
	// hbServed counts the Heartbeats calls served, for tests.
	hbServed atomic.Uint64
	// pipelinesServing counts the AppendEntriesPipeline streams being
	// served, for tests.
	pipelinesServing atomic.Int64

	// missing, when set, is told of a request for a group that has no
	// transport here (SetOnMissing).
	missing atomic.Pointer[func(group string)]
}

// SetOnMissing has fn called, on the serving goroutine, when a request
// arrives for a group with no transport on this node, before the request
// waits for one: a node whose replica of an idle group is closed
// (hibernated) opens it again, and the request is served by it.
func (m *Mux) SetOnMissing(fn func(group string)) { m.missing.Store(&fn) }

// onMissing tells the SetOnMissing function that group was asked for.
func (m *Mux) onMissing(group string) {
	if fn := m.missing.Load(); fn != nil {
		(*fn)(group)
	}
}

// NewMux returns a Mux for the node whose advertised internal address
// (host:port) is localAddr; peers use it as this node's
// raft.ServerAddress. The pool is the node's and is not closed by Close.
func NewMux(localAddr string, pool *rpc.Pool, log *slog.Logger) *Mux {
	if log == nil {
		log = slog.Default()
	}
	m := &Mux{local: localAddr, pool: pool, log: log, groups: make(map[string]*Transport),
		registered: make(chan struct{}), hb: make(map[hbKey]*peerHeartbeats)}
	m.groupWait.Store(int64(defaultGroupWait))
	return m
}

// Register registers the Raft gRPC service on s.
func (m *Mux) Register(s *grpc.Server) {
	raftpb.RegisterRaftServer(s, &server{mux: m})
}

// Transport returns the transport of one Raft group. It fails if the
// group has a transport already (until that one is closed) or if the Mux
// is closed.
func (m *Mux) Transport(group string) (*Transport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("transport: group %q: %w", group, ErrClosed)
	}
	if _, ok := m.groups[group]; ok {
		return nil, fmt.Errorf("transport: group %q is registered already", group)
	}
	t := newTransport(m, group)
	m.groups[group] = t
	close(m.registered)
	m.registered = make(chan struct{})
	return t, nil
}

// Close closes every group's transport; requests for any group then
// fail with codes.NotFound.
func (m *Mux) Close() error {
	m.mu.Lock()
	m.closed = true
	ts := make([]*Transport, 0, len(m.groups))
	for _, t := range m.groups {
		ts = append(ts, t)
	}
	m.mu.Unlock()
	for _, t := range ts {
		_ = t.Close()
	}
	return nil
}

// Registered reports whether group has a transport on this node (its
// replica is open or opening).
func (m *Mux) Registered(group string) bool { return m.lookup(group) != nil }

func (m *Mux) lookup(group string) *Transport {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.groups[group]
}

// defaultGroupWait bounds how long a request for a group waits for the
// group to be registered (server.group). Long enough for a node busy
// applying a burst of declares (a new queue's first election fails if its
// vote requests do, and then waits an election timeout), below
// rpcTimeout.
const defaultGroupWait = 8 * time.Second

// awaitGroup returns the group's transport, waiting up to d for it to be
// registered; nil if it was not, or the Mux is closed.
func (m *Mux) awaitGroup(ctx context.Context, group string, d time.Duration) *Transport {
	var timer *time.Timer
	for {
		m.mu.RLock()
		t, closed, registered := m.groups[group], m.closed, m.registered
		m.mu.RUnlock()
		if t != nil || closed {
			return t
		}
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		}
		select {
		case <-registered:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

func (m *Mux) unregister(t *Transport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.groups[t.group] == t {
		delete(m.groups, t.group)
	}
}
