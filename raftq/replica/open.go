package replica

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/linger"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/raftlog"
	"github.com/warrenmq/warren/raftq/wal"
)

// Open starts the replica, creating the group (with this node as its only
// member) on first open, and waits until it leads and has applied its log.
//
// Its steps, in order: newReplica opens the storage and builds the
// runtime, raftConfig sets raft's timeouts and limits, startRaft opens
// the snapshots, settles the group's first configuration, bootstraps it
// where this member is to and starts raft on the log, and begin starts
// the elections and the watcher (for a one-member group, after waiting to
// lead). Once the store is open, a failing step closes it again.
func Open(cfg Config) (*Replica, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	r, err := newReplica(cfg)
	if err != nil {
		return nil, err
	}
	o := &opening{r: r, rc: raftConfig(r)}
	if err := o.startRaft(); err != nil {
		r.storage.closeStore()
		return nil, err
	}
	if err := o.begin(); err != nil {
		return nil, err // begin shut the replica down
	}
	return r, nil
}

// newReplica parses the queue's arguments, opens its directory and log
// store, and builds the replica around them, raft not started yet.
func newReplica(cfg Config) (*Replica, error) {
	mcfg, dlxOnReject, err := parseArguments(cfg.Classic, cfg.Arguments)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create queue dir: %w", err)
	}
	store, closeStore, err := openStore(cfg)
	if err != nil {
		return nil, fmt.Errorf("open raft log: %w", err)
	}
	r := &Replica{
		core: core{
			name:   cfg.Name,
			dir:    cfg.Dir,
			log:    cfg.Log.With("queue", cfg.Name),
			cfg:    cfg,
			idBase: randomID() &^ 0xffffffff,
			done:   make(chan struct{}),
		},
		pub: publishes{
			publisher: randomID(),
			slots:     make(chan struct{}, inflightLimit),
			pending:   make(map[pendingKey]func(error)),
			linger:    heldPublishes{policy: linger.New(cfg.PublishLinger)},
		},
		storage: stores{
			store:      store,
			closeStore: closeStore,
			recent:     recentMessages{shared: cfg.Payloads},
		},
		consumers: consumerTable{
			byID:     make(map[raftq.ConsumerID]*consumerRef),
			byHandle: make(map[queue.Consumer]raftq.ConsumerID),
			toSettle: make(map[raftq.ConsumerID][]uint64),
		},
		settler: settler{wake: make(chan struct{}, 1)},
	}
	// The parts' pointers back: to the core, or to the replica for the
	// parts that call on others.
	r.pub.core = &r.core
	r.storage.core = &r.core
	r.consumers.r = r
	r.settler.r = r
	r.watch.r = r
	r.fo.core = &r.core
	r.upgrade.core = &r.core
	if cfg.PublishLinger > 0 && cfg.PublishLingerShare > 0 {
		r.pub.tail.share, r.pub.tail.linger = cfg.PublishLingerShare, cfg.PublishLinger
		r.pub.linger.policy.SetWait(0) // until the first window's p99
	}
	r.watch.looking.Store(true) // wakes wait for watch.start
	r.getter = r.newConsumerID()
	r.fsm = &fsm{r: r, m: raftq.New(mcfg, cfg.Created), dlxOnReject: dlxOnReject}
	r.dl = newDeadLetterer(r)
	return r, nil
}

// raftConfig is the raft configuration of r's member. For a group of
// several members it also records the timeouts in r's failover state.
func raftConfig(r *Replica) *raft.Config {
	cfg := r.cfg
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	// One member: elections are instant, so short timeouts only make
	// declaring fast. Several members: timeouts that survive a busy
	// machine; a dead leader's node is noticed by gossip as well.
	rc.HeartbeatTimeout = 100 * time.Millisecond
	rc.ElectionTimeout = 100 * time.Millisecond
	rc.LeaderLeaseTimeout = 50 * time.Millisecond
	if cfg.Transport != nil {
		rc.HeartbeatTimeout = orDefault(cfg.HeartbeatTimeout, time.Second)
		rc.ElectionTimeout = orDefault(cfg.ElectionTimeout, time.Second)
		// The lease must outlast the longest gap between answered
		// heartbeats with room for a slow machine: raft sends one a
		// tenth to a fifth of the timeout after the last answer, and the
		// node's transport may hold it up to half the timeout to share a
		// call (cluster/node). The lease can be no longer than the
		// heartbeat timeout, so it is the whole of it, and the timeouts
		// are never shortened (failover.go).
		rc.LeaderLeaseTimeout = rc.HeartbeatTimeout
		r.fo.init(rc)
		// Before raft starts: a member opened on existing state may ask
		// to campaign at once (expectLeader), which a drained one must not.
		r.fo.drained = cfg.Drained
	}
	rc.CommitTimeout = 5 * time.Millisecond
	if cfg.Transport != nil {
		// A leader sends every follower an AppendEntries each
		// CommitTimeout, entries or not, to pass on the commit index.
		// Commits do not wait for it (new entries go out at once), only
		// followers' applying does, which nothing reads: confirms come
		// from the leader, a new leader applies everything first, and
		// "caught up" is judged by the log a member holds. At 5 ms, a
		// hundred idle queues kept two cores busy; each of these sends
		// reads the log, so they are rare.
		rc.CommitTimeout = 3 * rc.HeartbeatTimeout
	}
	rc.BatchApplyCh = true
	// MaxAppendEntries bounds a leader's batch (one log write) and an
	// AppendEntries request, and raft sizes by it a buffer per request
	// and per commit (an 8-byte pointer per entry, whatever the batch
	// holds) and each group's apply channel. At 1,000 msg/s those
	// buffers were over half of a leader's allocation at 512; 128 kept
	// one queue's throughput (about 22,000 msg/s either way here) and
	// CPU per message, and took 7% off the memory 1,000 queues add
	// (docs/performance.md).
	rc.MaxAppendEntries = 128
	rc.SnapshotThreshold = minSnapshotThreshold
	// raft's own check whether to snapshot, a timer per group: rare,
	// since snapshotWhenDue starts them once the threshold is passed.
	// It stays for what the machine does not count (barriers and
	// configuration entries).
	rc.SnapshotInterval = 2 * time.Minute
	rc.TrailingLogs = 1024
	var self string // the address this member's own vote requests name (failover.go's raiseTerm)
	if cfg.Transport != nil {
		self = string(cfg.Transport.LocalAddr())
	}
	rc.Logger = raftlog.NewMember(r.log.With("component", "raft"), hclog.Warn, self)
	return rc
}

// opening is what Open's steps after newReplica share.
type opening struct {
	r  *Replica
	rc *raft.Config

	snaps raft.SnapshotStore
	// trans carries the group's traffic: Config.Transport, or an
	// in-memory one for a one-member group.
	trans raft.Transport
	// conf is the group's first configuration: every peer, or this
	// member alone.
	conf raft.Configuration
	// bootstrap: this member writes conf when it has no state yet
	// (always for one member; with Config.Bootstrap for several).
	bootstrap bool
	// logs is the log store raft is given (the replication cache over
	// the store that keeps live messages' entries).
	logs raft.LogStore
	// existing: this member holds raft state from an earlier run.
	existing bool
}

// startRaft opens the snapshot store, settles the group's configuration,
// prepares the log and starts raft on them. The caller closes the store
// if it fails.
func (o *opening) startRaft() error {
	if err := o.openSnapshots(); err != nil {
		return err
	}
	o.configuration()
	if err := o.prepareLog(); err != nil {
		return err
	}
	return o.newRaft()
}

// openSnapshots opens the group's snapshot store in Dir, wrapped so that
// a snapshot carries its live messages' entries (snapshot.go).
func (o *opening) openSnapshots() error {
	r := o.r
	files, err := raft.NewFileSnapshotStoreWithLogger(r.cfg.Dir, 2, o.rc.Logger)
	snaps := &bodyStore{SnapshotStore: files, logs: r.storage.store}
	r.storage.snaps = snaps
	if err != nil {
		return fmt.Errorf("open snapshot store: %w", err)
	}
	o.snaps = snaps
	return nil
}

// configuration picks the group's transport and first configuration: an
// in-memory transport and this member alone without Config.Transport,
// else Config.Peers, bootstrapped only with Config.Bootstrap.
func (o *opening) configuration() {
	r, cfg := o.r, o.r.cfg
	o.trans = cfg.Transport
	o.bootstrap = true
	if o.trans == nil {
		_, r.trans = raft.NewInmemTransport(raft.ServerAddress(cfg.NodeID))
		o.trans = r.trans
		o.conf.Servers = []raft.Server{{ID: o.rc.LocalID, Address: r.trans.LocalAddr()}}
	} else {
		o.bootstrap = cfg.Bootstrap
		for _, p := range cfg.Peers {
			o.conf.Servers = append(o.conf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
	}
}

// prepareLog wraps the store for raft, finds whether this member has
// state already and, where it is to, writes the group's first
// configuration (or keeps it for later, Config.Follow).
func (o *opening) prepareLog() error {
	r, cfg := o.r, o.r.cfg
	// The cache keeps the latest entries raft stored, so that sending them
	// to followers (raft reads every entry it replicates back from the
	// store) costs no read and decode.
	logs, err := raft.NewLogCache(replicationCache, &liveLogStore{LogStore: r.storage.store, live: r.fsm.liveIndexes})
	if err != nil {
		return fmt.Errorf("log cache: %w", err)
	}
	o.logs = logs
	existing, err := raft.HasExistingState(logs, r.storage.store, o.snaps)
	if err != nil {
		return fmt.Errorf("read raft state: %w", err)
	}
	o.existing = existing
	if existing {
		if err := checkRestorable(r.storage.snaps.SnapshotStore, r.storage.store); err != nil {
			return fmt.Errorf("queue %s: %w", cfg.Name, err) // integrity.go
		}
	}
	switch {
	case !existing && o.bootstrap && cfg.Follow:
		// Kept, not written: see failover.go's bootstrapLate.
		r.fo.lateConf.Store(&o.conf)
	case !existing && o.bootstrap:
		if err := raft.BootstrapCluster(o.rc, logs, r.storage.store, o.snaps, o.trans, o.conf); err != nil {
			return fmt.Errorf("bootstrap raft group: %w", err)
		}
	case existing && cfg.Rebootstrapped:
		if err := bootstrapAfterVote(logs, o.snaps, o.conf); err != nil {
			return fmt.Errorf("bootstrap raft group after its first vote: %w", err)
		}
	}
	return nil
}

// newRaft starts raft, which begins applying the log at once, and hooks
// the replica into it and into the transport.
func (o *opening) newRaft() error {
	r := o.r
	var err error
	r.raft, err = raft.NewRaft(o.rc, r.fsm, o.logs, r.storage.store, o.snaps, o.trans)
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	r.leaderOf.Store(r.raft)
	r.raft.RegisterObserver(raft.NewObserver(nil, false, r.watch.observe))
	if j, ok := r.cfg.Transport.(voteJudge); ok {
		j.JudgeVotesOf(r.raft) // cluster/transport's votes.go
	}
	if pi, ok := r.cfg.Transport.(pipelineIdler); ok {
		pi.SetPipelineIdle(func(lastAcked uint64) {
			if r.raft.LastIndex() > lastAcked {
				r.watch.wake(&r.watch.wantBarrier) // raft sends the follower's next batch
			}
		})
	}
	return nil
}

// begin starts the member's part in elections and its watcher. A
// one-member group first waits to lead and to have applied its log; if
// it does not, the replica is shut down and begin says why.
func (o *opening) begin() error {
	r, cfg := o.r, o.r.cfg
	if !o.existing && o.bootstrap && !cfg.Follow && cfg.Transport != nil {
		go r.fo.campaign() // failover.go
	}
	if o.existing && cfg.Transport != nil {
		r.fo.expectLeader() // failover.go: elect sooner after a restart
	}
	if cfg.Transport == nil {
		if err := r.awaitLeadership(10 * time.Second); err != nil {
			r.shutdown(queue.ErrDeleted)
			return err
		}
		r.leaderApplied.Store(true)
		r.watch.onLeading()
	}
	r.watch.start(cfg.Transport == nil) // onLeading ran above
	return nil
}

// replicationCache is how many of a group's latest entries stay in memory
// for replication: one pipelined round of a busy queue. Their bodies are
// referenced, not copied; an idle group's are its last few commands.
const replicationCache = 64

// raftStore is a group's Raft log and stable store.
type raftStore interface {
	raft.LogStore
	raft.StableStore
}

// openStore opens the group's log and stable store: its group in the
// node's write-ahead log, or a log of its own in Dir. A bbolt file left
// in Dir by an earlier version is moved into it first.
func openStore(cfg Config) (raftStore, func() error, error) {
	w, closeLog := cfg.WAL, func() error { return nil }
	if w == nil {
		var err error
		if w, err = wal.Open(filepath.Join(cfg.Dir, "wal"), wal.Options{Logger: cfg.Log}); err != nil {
			return nil, nil, err
		}
		closeLog = w.Close
	}
	id := logGroup(cfg)
	if path := filepath.Join(cfg.Dir, "log.db"); fileExists(path) {
		if err := importBoltFile(path, w, id); err != nil {
			closeLog()
			return nil, nil, fmt.Errorf("move %s into the write-ahead log: %w", path, err)
		}
	}
	g, err := w.Group(id)
	if err != nil {
		closeLog()
		return nil, nil, err
	}
	return g, closeLog, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// WALGroup is the group's name in the write-ahead log.
func (cfg Config) WALGroup() string { return logGroup(cfg) }

// logGroup is the group's name in the write-ahead log.
func logGroup(cfg Config) string {
	if cfg.LogGroup != "" {
		return cfg.LogGroup
	}
	return filepath.Base(cfg.Dir)
}

// voteJudge is a transport that answers pre-votes from candidates the
// member's configuration does not count as voters, from raft's state
// (cluster/transport's JudgeVotesOf): a member that missed another's
// promotion would refuse it outright.
type voteJudge interface {
	JudgeVotesOf(*raft.Raft)
}

// pipelineIdler is a transport that says when a replication pipeline went
// idle short of the leader's log (cluster/transport's SetPipelineIdle):
// raft sends a lagging follower one batch per new entry or CommitTimeout.
type pipelineIdler interface {
	SetPipelineIdle(fn func(lastAcked uint64))
}
