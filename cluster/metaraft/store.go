package metaraft

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"

	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/proto/metapb"
	"github.com/warrenmq/warren/raftq/raftlog"
)

// Config configures a node's member of the metadata group.
type Config struct {
	NodeID string // this node's name: the Raft ServerID
	// Addr is this node's internal address: its Raft ServerAddress, and
	// where its Meta gRPC service listens (peers reach the leader's
	// there).
	Addr      string
	Dir       string         // Raft log, stable store and snapshots
	Transport raft.Transport // Raft traffic; closed by Close if it implements raft.WithClose
	Pool      *rpc.Pool      // connections to the leader's Meta service
	Log       *slog.Logger
	// Raft timing; zero picks 1 s each, for a LAN cluster.
	HeartbeatTimeout, ElectionTimeout time.Duration
	// CommitTimeout is raft's: how often an idle leader sends each
	// follower an AppendEntries. Zero picks defaultCommitTimeout.
	// Followers do not wait for it to learn of a commit (notice.go).
	CommitTimeout time.Duration
	// OnStorageFailure, if set, is told when a term, a vote or a log
	// entry cannot be saved (a full disk): the node is then to stop
	// (stable.go, holdlogs.go).
	OnStorageFailure func(error)
}

// Store is this node's member of the metadata group. It implements
// catalog.Store: Load reads the local applied copy, Apply goes through
// the leader.
type Store struct {
	cfg    Config
	log    *slog.Logger
	origin string
	fsm    *fsm
	logs   *raftboltdb.BoltStore
	snaps  *raft.FileSnapshotStore
	raft   *raft.Raft

	// applyTimeout bounds Apply, AddServer and RemoveServer, retries
	// across leader changes included.
	applyTimeout time.Duration
	confMu       sync.Mutex // see doc.go

	// notice wakes runNotices after a commit on the leader; noticesDone
	// closes when runNotices returns.
	notice      chan struct{}
	noticesDone chan struct{}

	// lag holds the followers a wait for an entry gave up on, with that
	// entry's index (awaitFollowers).
	lagMu sync.Mutex
	lag   map[raft.ServerAddress]uint64

	// caughtUp is set by the first CatchUp that succeeds: until then the
	// state is what this node held when it stopped, and MayBeStale says so.
	caughtUp atomic.Bool
	// gaps counts the times this node went without hearing from a
	// leader for longer than staleAfter (watchContact), and caughtGap is
	// gaps as it was when the last CatchUp that succeeded began:
	// MayBeStale holds while they differ.
	gaps, caughtGap atomic.Uint64
	contactDone     chan struct{}

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

var _ catalog.Store = (*Store)(nil)

// Server is a member of the group's configuration.
type Server struct {
	ID, Addr string
	Voter    bool
}

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("meta: store closed")

const (
	defaultTimeout = time.Second
	// defaultCommitTimeout is long: followers learn of commits from the
	// barrier that follows them (notice.go), so this only paces the
	// AppendEntries that tell them the barrier itself committed.
	defaultCommitTimeout = time.Second
	// applyTimeout is how long Apply keeps trying to reach a leader.
	applyTimeout = 10 * time.Second
)

// Open opens (creating if needed) this node's Raft state in cfg.Dir and
// starts its Raft member. A node with no state yet waits, as a follower
// without a configuration, until Bootstrap or a leader's AddServer.
func Open(cfg Config) (*Store, error) {
	switch {
	case cfg.NodeID == "", cfg.Addr == "", cfg.Dir == "":
		return nil, errors.New("meta: NodeID, Addr and Dir are required")
	case cfg.Transport == nil, cfg.Pool == nil:
		return nil, errors.New("meta: Transport and Pool are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = defaultTimeout
	}
	if cfg.ElectionTimeout == 0 {
		cfg.ElectionTimeout = defaultTimeout
	}
	if cfg.CommitTimeout == 0 {
		cfg.CommitTimeout = defaultCommitTimeout
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	s := &Store{
		lag:          make(map[raft.ServerAddress]uint64),
		cfg:          cfg,
		log:          cfg.Log.With("component", "meta"),
		origin:       randomID(8),
		fsm:          newFSM(),
		applyTimeout: applyTimeout,
		notice:       make(chan struct{}, 1),
		noticesDone:  make(chan struct{}),
		contactDone:  make(chan struct{}),
		closed:       make(chan struct{}),
	}
	logger := raftlog.New(s.log, hclog.Info)

	path := filepath.Join(cfg.Dir, "raft.db")
	logs, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{Timeout: 5 * time.Second}})
	if err != nil {
		return nil, fmt.Errorf("meta: open raft log %s: %w", path, err)
	}
	s.logs = logs
	s.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, logger)
	if err != nil {
		logs.Close()
		return nil, fmt.Errorf("meta: open snapshots: %w", err)
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = logger
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = min(rc.LeaderLeaseTimeout, cfg.HeartbeatTimeout)
	rc.CommitTimeout = cfg.CommitTimeout
	if t, ok := cfg.Transport.(ackTracker); ok {
		t.TrackAcks() // awaitFollowers
	}
	stable := &holdingStable{StableStore: logs, fail: cfg.OnStorageFailure}
	s.raft, err = raft.NewRaft(rc, s.fsm, &holdingLogs{LogStore: logs, hold: stable}, stable, s.snaps, cfg.Transport)
	if err != nil {
		logs.Close()
		return nil, fmt.Errorf("meta: start raft: %w", err)
	}
	if j, ok := cfg.Transport.(voteJudge); ok {
		j.JudgeVotesOf(s.raft)
	}
	go s.runNotices()
	go s.watchContact()
	return s, nil
}

// voteJudge is a transport that answers pre-votes from candidates the
// member's configuration does not count as voters, from raft's state
// (cluster/transport's votes.go): a node that missed another's promotion
// would refuse it outright.
type voteJudge interface {
	JudgeVotesOf(*raft.Raft)
}

// Register adds the Meta gRPC service (forwarded proposals and
// membership changes) to g.
func (s *Store) Register(g *grpc.Server) { metapb.RegisterMetaServer(g, &service{s: s}) }

// Origin identifies this process run's proposals in Updates: random per
// Open.
func (s *Store) Origin() string { return s.origin }

// HasState reports whether this node has Raft state from an earlier run,
// a bootstrap or a join.
func (s *Store) HasState() bool {
	ok, err := raft.HasExistingState(s.logs, s.logs, s.snaps)
	if err != nil {
		s.log.Warn("reading raft state", "err", err)
	}
	return ok
}

// Bootstrap forms a new cluster with servers as its configuration, only
// when this node has no Raft state yet; otherwise it does nothing.
func (s *Store) Bootstrap(servers []Server) error {
	if s.HasState() {
		return nil
	}
	var conf raft.Configuration
	for _, sv := range servers {
		suffrage := raft.Voter
		if !sv.Voter {
			suffrage = raft.Nonvoter
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: suffrage, ID: raft.ServerID(sv.ID), Address: raft.ServerAddress(sv.Addr)})
	}
	err := s.raft.BootstrapCluster(conf).Error()
	if errors.Is(err, raft.ErrCantBootstrap) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("meta: bootstrap: %w", err)
	}
	return nil
}

// Load returns this node's applied copy of every record, in BoltStore's
// order. It may lag the leader's by the entries not yet applied here.
func (s *Store) Load() (*catalog.Snapshot, error) {
	snap, _ := s.fsm.load()
	return snap, nil
}

// Subscribe returns the current state and the log index it reflects, and
// from then on calls fn with every later update, in log order, on a
// goroutine of the store's own. Only one subscriber is supported; fn
// should not block for long (updates queue meanwhile). Close stops the
// calls.
func (s *Store) Subscribe(fn func(Update)) (*catalog.Snapshot, uint64) {
	return s.fsm.subscribe(fn)
}

// Leader returns the leader's ID and address as this node knows them,
// empty when it knows none.
func (s *Store) Leader() (id, addr string) {
	a, i := s.raft.LeaderWithID()
	return string(i), string(a)
}

// IsLeader reports whether this node leads the group.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// WaitLeader waits until this node knows a leader.
func (s *Store) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if _, addr := s.Leader(); addr != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("meta: no leader: %w", ctx.Err())
		case <-s.closed:
			return ErrClosed
		case <-t.C:
		}
	}
}

// Stats is raft's Stats(): state, term, last and applied index, etc.
func (s *Store) Stats() map[string]string { return s.raft.Stats() }

// Close stops the Raft member (closing the transport when it implements
// raft.WithClose), the subscriber's calls and the log store.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		if h, ok := s.cfg.Transport.(interface{ StopLingering() }); ok {
			h.StopLingering() // raft.Shutdown waits for calls waiting on a peer
		}
		err := s.raft.Shutdown().Error()
		<-s.noticesDone
		<-s.contactDone
		s.fsm.stop()
		s.closeErr = errors.Join(err, s.logs.Close())
	})
	return s.closeErr
}

func randomID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
