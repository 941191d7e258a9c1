package transport

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/raftq/testwait"
)

// A test cluster: n nodes in one process, each with its own gRPC server
// on a loopback port, rpc.Pool and Mux, and one raft.Raft per group per
// node, every group with a member on every node.

type harness struct {
	t      *testing.T
	nodes  []*node
	groups []string
	conf   func(*raft.Config)
}

type node struct {
	id   raft.ServerID
	addr string

	// Set while the node runs.
	srv  *grpc.Server
	pool *rpc.Pool
	mux  *Mux

	mu      sync.Mutex
	members map[string]*member // by group
}

// member is one node's replica of one group. Its stores outlive a node
// restart, as a disk would.
type member struct {
	logs *raft.InmemStore
	// stalled makes the member's log writes wait until it is cleared,
	// as a disk that stops answering would (stallingLog).
	stalled atomic.Bool
	snaps   raft.SnapshotStore
	fsm     *countFSM
	raft    *raft.Raft
	trans   *Transport
}

// stallingLog is a member's log store whose writes wait while the member
// is stalled.
type stallingLog struct{ m *member }

func (s stallingLog) FirstIndex() (uint64, error)        { return s.m.logs.FirstIndex() }
func (s stallingLog) LastIndex() (uint64, error)         { return s.m.logs.LastIndex() }
func (s stallingLog) GetLog(i uint64, l *raft.Log) error { return s.m.logs.GetLog(i, l) }
func (s stallingLog) DeleteRange(lo, hi uint64) error    { return s.m.logs.DeleteRange(lo, hi) }
func (s stallingLog) StoreLog(l *raft.Log) error         { return s.StoreLogs([]*raft.Log{l}) }
func (s stallingLog) StoreLogs(logs []*raft.Log) error {
	for s.m.stalled.Load() {
		time.Sleep(5 * time.Millisecond) // a disk that does not answer, until unstalled
	}
	return s.m.logs.StoreLogs(logs)
}

// fastConfig: short timeouts for tests, with room for a loaded machine.
func fastConfig(c *raft.Config) {
	c.HeartbeatTimeout = 400 * time.Millisecond
	c.ElectionTimeout = 400 * time.Millisecond
	c.LeaderLeaseTimeout = 200 * time.Millisecond
	c.CommitTimeout = 20 * time.Millisecond
	c.SnapshotThreshold = 1 << 30
	c.SnapshotInterval = time.Hour
}

// newHarness starts n nodes carrying the given groups, bootstrapped on the
// first node with every node a voter.
func newHarness(t *testing.T, n int, groups []string, conf func(*raft.Config)) *harness {
	t.Helper()
	h := &harness{t: t, groups: groups, conf: conf}
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nd := &node{id: raft.ServerID(fmt.Sprintf("n%d", i)), addr: lis.Addr().String(), members: make(map[string]*member)}
		h.nodes = append(h.nodes, nd)
		h.serve(nd, lis)
	}
	var servers []raft.Server
	for _, nd := range h.nodes {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: nd.id, Address: raft.ServerAddress(nd.addr)})
	}
	for _, g := range groups {
		for i, nd := range h.nodes {
			m := &member{logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
			if i == 0 {
				_, tr := raft.NewInmemTransport("")
				if err := raft.BootstrapCluster(h.config(nd), m.logs, m.logs, m.snaps, tr,
					raft.Configuration{Servers: servers}); err != nil {
					t.Fatal(err)
				}
			}
			nd.members[g] = m
		}
	}
	for _, nd := range h.nodes {
		h.startRafts(nd)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, nd := range h.nodes {
			wg.Go(func() { h.stop(nd) })
		}
		wg.Wait()
	})
	return h
}

func (h *harness) config(nd *node) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = nd.id
	c.Logger = hclog.NewNullLogger()
	fastConfig(c)
	if h.conf != nil {
		h.conf(c)
	}
	return c
}

// serve starts nd's gRPC server, pool and Mux on lis.
func (h *harness) serve(nd *node, lis net.Listener) {
	nd.srv = grpc.NewServer(rpc.ServerOptions()...)
	nd.pool = rpc.NewPool()
	nd.mux = NewMux(nd.addr, nd.pool, slog.New(slog.DiscardHandler))
	nd.mux.Register(nd.srv)
	srv := nd.srv
	go func() { _ = srv.Serve(lis) }()
}

func (h *harness) startRafts(nd *node) {
	h.t.Helper()
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for _, g := range h.groups {
		m := nd.members[g]
		tr, err := nd.mux.Transport(g)
		if err != nil {
			h.t.Fatal(err)
		}
		m.fsm, m.trans = &countFSM{}, tr
		r, err := raft.NewRaft(h.config(nd), m.fsm, stallingLog{m}, m.logs, m.snaps, tr)
		if err != nil {
			h.t.Fatal(err)
		}
		tr.JudgeVotesOf(r)
		m.raft = r
	}
}

// stop stops nd's server, Mux, rafts and pool; its stores remain.
func (h *harness) stop(nd *node) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.srv == nil {
		return
	}
	nd.srv.Stop()
	_ = nd.mux.Close()
	var wg sync.WaitGroup
	for _, m := range nd.members {
		if m.raft != nil {
			r := m.raft
			wg.Go(func() { _ = r.Shutdown().Error() })
			m.raft = nil
		}
	}
	wg.Wait()
	_ = nd.pool.Close()
	nd.srv, nd.mux, nd.pool = nil, nil, nil
}

// restart brings a stopped node back on its address with its stores.
func (h *harness) restart(nd *node) {
	h.t.Helper()
	var lis net.Listener
	testwait.ForNil(h.t, 10*time.Second, "listen on "+nd.addr, func() error {
		var err error
		lis, err = net.Listen("tcp", nd.addr)
		return err
	})
	h.serve(nd, lis)
	h.startRafts(nd)
}

func (nd *node) member(g string) *member {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.members[g]
}

func (nd *node) running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.srv != nil
}

// leader waits until one running member of g is leader and returns its
// node.
func (h *harness) leader(g string) *node {
	h.t.Helper()
	var ld *node
	testwait.ForNil(h.t, 15*time.Second, "a leader for "+g, func() error {
		for _, nd := range h.nodes {
			if !nd.running() {
				continue
			}
			if r := nd.member(g).raft; r != nil && r.State() == raft.Leader {
				ld = nd
				return nil
			}
		}
		return errors.New("no leader")
	})
	return ld
}

// apply applies n commands of size bytes each to g through its leader,
// retrying on a leader change (so a few may be applied twice).
func (h *harness) apply(g string, n, size int) {
	h.t.Helper()
	payload := bytes.Repeat([]byte{'x'}, size)
	for i := 0; i < n; {
		ld := h.leader(g)
		r := ld.member(g).raft
		// Pipelined: up to 64 futures in flight.
		batch := min(64, n-i)
		fs := make([]raft.ApplyFuture, batch)
		for j := range fs {
			data := binary.BigEndian.AppendUint64(slices.Clone(payload), uint64(i+j))
			fs[j] = r.Apply(data, 5*time.Second)
		}
		ok := 0
		for _, f := range fs {
			if f.Error() == nil {
				ok++
			} else {
				break
			}
		}
		if ok < batch {
			// A leader change: some may have been applied anyway, which
			// the state check tolerates by comparing members, not counts.
			time.Sleep(50 * time.Millisecond) // a moment for the election before the next batch
		}
		i += ok
	}
}

// converged waits until every running member of g has applied at least
// want commands and all their states are equal.
func (h *harness) converged(g string, want uint64) {
	h.t.Helper()
	h.convergedWithin(g, want, 20*time.Second)
}

// convergedWithin is converged with its own time limit.
func (h *harness) convergedWithin(g string, want uint64, limit time.Duration) {
	h.t.Helper()
	testwait.ForNil(h.t, limit, g+" converged", func() error {
		var states []fsmState
		for _, nd := range h.nodes {
			if !nd.running() {
				continue
			}
			s := nd.member(g).fsm.state()
			if s.count < want {
				return fmt.Errorf("%s on %s has %d of %d", g, nd.id, s.count, want)
			}
			states = append(states, s)
		}
		for _, s := range states[1:] {
			if s != states[0] {
				return fmt.Errorf("%s differs: %+v vs %+v", g, s, states[0])
			}
		}
		return nil
	})
}

// countFSM counts commands and keeps their bytes, so that its snapshot
// grows with what was applied.
type countFSM struct {
	mu    sync.Mutex
	count uint64
	data  []byte
}

type fsmState struct {
	count uint64
	sum   [32]byte
}

func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count++
	f.data = append(f.data, l.Data...)
	return f.count
}

func (f *countFSM) state() fsmState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fsmState{count: f.count, sum: sha256.Sum256(f.data)}
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &countSnapshot{count: f.count, data: slices.Clone(f.data)}, nil
}

func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if len(b) < 8 {
		return errors.New("short snapshot")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count, f.data = binary.BigEndian.Uint64(b), b[8:]
	return nil
}

type countSnapshot struct {
	count uint64
	data  []byte
}

func (s *countSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, s.count)); err != nil {
		_ = sink.Cancel()
		return err
	}
	if _, err := sink.Write(s.data); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *countSnapshot) Release() {}
