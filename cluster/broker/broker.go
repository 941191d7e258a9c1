package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// Config is what the broker needs from the node's configuration.
type Config struct {
	// LoopbackUsers may only connect from a loopback address
	// (RabbitMQ's loopback_users; ["guest"] by default).
	LoopbackUsers []string
	// DefaultQueueType for vhosts created by seeding ("quorum").
	DefaultQueueType string
	// Seed is applied when the store is empty: the first start.
	Seed Seed
	// MemoryLimit is the memory high watermark: the memory the node may
	// use before publishers are blocked (see queue.Budget for how it is
	// counted). Zero means no limit.
	MemoryLimit int64
	// DenyTransientQueues refuses non-durable, non-exclusive queues as
	// RabbitMQ 4.3 does by default; Warren accepts them unless set, as
	// RabbitMQ did before 4.3.
	DenyTransientQueues bool
	// DenyQueueMasterLocator refuses the x-queue-master-locator argument
	// of a classic queue and the queue-master-locator policy key, both
	// deprecated, as RabbitMQ 4.3 does by default; Warren accepts them
	// unless set (they place nothing: a classic queue lives on the node
	// that declared it), as RabbitMQ did before 4.3.
	DenyQueueMasterLocator bool
	// ConsumerDisconnectedTimeout is how long a quorum queue keeps the
	// messages of a consumer whose node is cut off from its leader, for
	// queues whose arguments and policies set none (RabbitMQ 4.3's
	// consumer_disconnected_timeout; replica/disconnected.go). Zero
	// returns them at once.
	ConsumerDisconnectedTimeout time.Duration
	// Replica is how this node's replicated queues replicate: the
	// write-ahead log a standalone node's groups share, the payload
	// cache, publish lingering (raftq/replica's Config). Each queue opens
	// with a copy to which the broker adds only what is the queue's own
	// (its name, directory, arguments, callbacks); the rest reaches the
	// replica as the node set it.
	Replica replica.Config
	// DataDir holds the quorum queues' Raft logs, under quorum/.
	DataDir string
	// NodeID is this node's name in Raft groups; DefaultNodeID if empty
	// (a standalone node's always).
	NodeID string
	// Cluster is the cluster this node belongs to; nil for a standalone
	// node, whose replicated queues have this node as their one member.
	Cluster Cluster
}

// Cluster is what the broker needs of the cluster around it: where queues
// may be placed, and how a replicated queue is opened on this node.
type Cluster interface {
	// PlacementNodes are the nodes new queues may be placed on (alive,
	// in the metadata group), sorted by name.
	PlacementNodes() []string
	// OpenQueue starts this node's side of the replicated queue rec: its
	// replica when the node is a member (cfg says how, the cluster adds
	// the transport and peers), wrapped in a router that forwards every
	// operation to the group's leader.
	OpenQueue(rec catalog.Queue, cfg replica.Config) (queue.Queue, error)
	// OpenRemote reaches rec, another node's in-memory queue, through
	// that node (remote.go); name is "vhost/name", for logs.
	OpenRemote(rec catalog.Queue, name string) (queue.Queue, error)
	// Boot names this start of the node: in-memory queues' records
	// carry it, and die with it.
	Boot() string
}

// Watchable is a metadata store that other nodes write to as well: the
// broker then applies what they committed to its own model. The cluster's
// metadata group (cluster/metaraft) is one.
type Watchable interface {
	catalog.Store
	// Origin identifies changes proposed through this process: the
	// broker applied those itself when it proposed them.
	Origin() string
	// Subscribe returns the current state and calls fn, in log order, with
	// every later committed update.
	Subscribe(fn func(origin string, changes []catalog.Change, reset *catalog.Snapshot)) *catalog.Snapshot
	// CatchUp returns once every change committed before the call has
	// been handed to the subscriber (and so applied to the model).
	CatchUp(ctx context.Context) error
	// MayBeStale reports, cheaply, whether the model may lack a change
	// committed through another node.
	MayBeStale() bool
	// ApplyContext is Apply bounded by ctx.
	ApplyContext(ctx context.Context, changes ...catalog.Change) error
	// CaughtUp reports whether a CatchUp has succeeded since the store
	// opened: until then a restarted node's model may be replaying
	// changes long superseded.
	CaughtUp() bool
}

// Broker is the node's model of users, vhosts and their contents. It is
// the shared core (store, configuration, log, lifetime) with its parts
// embedded, so that their exported methods are the broker's API; the
// package doc lists the parts and what each owns.
type Broker struct {
	log   *slog.Logger
	store catalog.Store
	cfg   Config
	// fresh knows whether the model may lag the replicated metadata, and
	// catches it up (freshness.go).
	fresh freshness
	// ctx is done once the broker closes: it stops the policy
	// reconciler and the removal of transient queues (remote.go).
	ctx  context.Context
	stop context.CancelFunc

	resources
	accessControl
	vhostTable
	nodeTable
	transientQueues
	policyOps
	metadataApplier
}

// DefaultNodeID is the node ID of a node that names none: a standalone
// node's, the one its queues' groups know it by.
const DefaultNodeID = "warren@localhost"

// New loads the store, seeding it on first start, and recreates every
// durable exchange, queue and binding.
func New(cfg Config, store catalog.Store, log *slog.Logger) (*Broker, error) {
	if cfg.DefaultQueueType == "" {
		cfg.DefaultQueueType = QueueTypeQuorum
	}
	if cfg.NodeID == "" {
		cfg.NodeID = DefaultNodeID
	}
	if cfg.LoopbackUsers == nil {
		cfg.LoopbackUsers = []string{"guest"}
	}
	b := &Broker{log: log, store: store, cfg: cfg}
	b.ctx, b.stop = context.WithCancel(context.Background())
	b.fresh.init(store, log)
	b.resources.init(cfg, log)
	b.accessControl.init(b)
	b.vhostTable.init(b)
	b.nodeTable.init(store, log)
	b.transientQueues.b = b
	b.policyOps.init(b)
	b.metadataApplier.b = b
	if w, ok := store.(Watchable); ok {
		// A cluster member: the store is the truth and other nodes write
		// to it. Updates wait for the restore below (b.ready).
		b.ready = make(chan struct{})
		snap := w.Subscribe(b.applyUpdate)
		err := b.restore(snap)
		close(b.ready)
		if err != nil {
			return nil, err
		}
		go b.reconcile() // after restore, which fills the maps unlocked
		if cfg.Cluster != nil {
			go b.dropStale()
		}
		return b, nil // the node seeds a new cluster (SeedIfEmpty)
	}
	snap, err := store.Load()
	if err == nil && len(snap.Vhosts) == 0 && len(snap.Users) == 0 {
		snap, err = b.seed(cfg.Seed)
	}
	if err == nil {
		err = b.restore(snap)
	}
	if err != nil {
		return nil, err
	}
	go b.reconcile() // after restore, which fills the maps unlocked
	return b, nil
}

// NodeID is this node's name (a standalone node's is DefaultNodeID).
func (b *Broker) NodeID() string { return b.cfg.NodeID }

// commit stores changes and applies them to this node's model.
func (b *Broker) commit(changes ...catalog.Change) error {
	if err := b.store.Apply(changes...); err != nil {
		if errors.Is(err, catalog.ErrExists) {
			return err
		}
		b.log.Error("metadata store write failed", "err", err)
		return fmt.Errorf("metadata store write failed: %w", err)
	}
	b.applyChanges(changes)
	return nil
}

// queueDir is where a replicated queue keeps its Raft group: named by the
// group's ID (unique per declaration), or for records written before IDs
// by a hash of the queue's identity, since names may hold any character.
func (b *Broker) queueDir(rec catalog.Queue) string {
	return filepath.Join(b.cfg.DataDir, "quorum", GroupName(rec))
}

// GroupName names a replicated queue's group on disk: its ID, or for a
// record written without one (a standalone node of an older version) a
// hash of its vhost and name.
func GroupName(rec catalog.Queue) string {
	if rec.ID != "" {
		return rec.ID
	}
	sum := sha256.Sum256([]byte(rec.Vhost + "\x00" + rec.Name))
	return hex.EncodeToString(sum[:12])
}

// Close stops every queue and closes the store.
func (b *Broker) Close() error {
	b.stopReconcile()
	vhosts := b.selectVhosts("")
	for _, v := range vhosts {
		v.close()
	}
	return b.store.Close()
}
