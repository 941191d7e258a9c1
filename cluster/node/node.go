package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/alarm"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/pki"
	"github.com/warrenmq/warren/raftq/replica"
	"github.com/warrenmq/warren/raftq/wal"
)

// Config is everything a node needs.
type Config struct {
	// DataDir holds the node's files; it is created if missing.
	DataDir string
	// AMQPAddr is the AMQP listen address, e.g. ":5672" or
	// "127.0.0.1:0" for a free port.
	AMQPAddr string
	// AMQPSAddr, when set, is a second client listener that speaks AMQP
	// over TLS (5671 by convention; RabbitMQ's listeners.ssl), with
	// AMQPTLS, the listener's TLS configuration.
	AMQPSAddr string
	AMQPTLS   *tls.Config
	// AdminAddr, on a standalone node, serves the admin service warrenctl
	// talks to (a cluster member serves it on its internal port), with
	// AdminTLS when set (standalone_admin.go). Version is reported there.
	AdminAddr string
	AdminTLS  *pki.Store
	Version   string
	// OnStorageFailure, if set, is told when the queues' write-ahead log
	// or the metadata group's stable store can no longer write (a full
	// disk, an I/O error): the process is then to exit. Writes from then on
	// wait for good rather than fail (raftq/wal's failure.go, metaraft's
	// stable.go), so that no Raft group panics meanwhile.
	OnStorageFailure func(error)
	Server           server.Config
	Broker           broker.Config
	// DiskFreeLimit raises the node's disk alarm while the file system
	// of DataDir has less free space (RabbitMQ's disk_free_limit); zero
	// or less never does.
	DiskFreeLimit int64
	// MessageBytesOnly has the memory alarm count only the message
	// bytes in-memory queues hold, not the process's memory: for tests
	// that run several nodes in one process, whose memory they share.
	MessageBytesOnly bool
	// PayloadCache bounds the bytes of message payloads the node's
	// quorum queue leaders keep in memory, all together, for delivery
	// (replica.PayloadCache); zero is DefaultPayloadCache, negative keeps
	// none. The node builds the cache unless Broker.Replica.Payloads is set.
	PayloadCache int64
	Log          *slog.Logger
	// Cluster makes the node a cluster member; nil is a standalone node
	// (its metadata in a local file, its queues' groups of one member).
	Cluster *ClusterConfig
}

// DefaultPayloadCache is Config.PayloadCache's default: 64 busy queues'
// worth of what one queue keeps (replica.DefaultPayloadCache).
const DefaultPayloadCache = replica.DefaultPayloadCache

// DefaultDisconnectedTimeout is RabbitMQ 4.3's consumer_disconnected_timeout
// default, for broker.Config.ConsumerDisconnectedTimeout
// (replica.DefaultDisconnectedTimeout).
const DefaultDisconnectedTimeout = replica.DefaultDisconnectedTimeout

// PayloadCacheLimit is the bound PayloadCache sets, its default applied.
func (c Config) PayloadCacheLimit() int64 {
	switch {
	case c.PayloadCache < 0:
		return 0
	case c.PayloadCache == 0:
		return DefaultPayloadCache
	}
	return c.PayloadCache
}

// connectionCountWait bounds how long a connection or channel opening
// under a vhost's or a user's limit waits for the other nodes' counts.
const connectionCountWait = 3 * time.Second

// Node is a running node.
type Node struct {
	cfg     Config
	log     *slog.Logger
	store   catalog.Store
	broker  *broker.Broker
	cluster *clusterNode
	server  *server.Server
	ln      net.Listener
	tlsLn   net.Listener // nil without AMQPSAddr
	admin   *adminPort   // a standalone node's admin service, nil without
	disk    *alarm.DiskMonitor
	memory  *alarm.MemoryMonitor // nil with MessageBytesOnly
	started time.Time

	// qlog holds a standalone node's replicated queues' Raft logs; nil on
	// a cluster member, whose clusterNode has its own.
	qlog *wal.Log

	served   chan struct{} // closed when Serve returns
	serveErr error
	// stopWaiting ends a cluster member's wait to serve (Start).
	stopWaiting context.CancelFunc
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
	migrate, err := checkDataDir(cfg.DataDir, cfg.Cluster)
	if err != nil {
		return nil, err
	}
	if cfg.Broker.DataDir == "" {
		cfg.Broker.DataDir = cfg.DataDir
	}
	if cfg.Broker.Replica.Payloads == nil {
		cfg.Broker.Replica.Payloads = replica.NewPayloadCache(cfg.PayloadCacheLimit())
	}
	store, cn, qlog, err := openStore(&cfg, migrate, log)
	if err != nil {
		return nil, err
	}
	b, err := broker.New(cfg.Broker, store, log.With("component", "broker"))
	if err != nil {
		store.Close()
		closeWAL(qlog)
		if cn != nil {
			cn.close()
		}
		return nil, fmt.Errorf("start broker: %w", err)
	}
	disk := alarm.StartDiskMonitor(cfg.DataDir, cfg.DiskFreeLimit, b.Alarms(), log.With("component", "alarm"))
	var memory *alarm.MemoryMonitor
	if !cfg.MessageBytesOnly {
		memory = alarm.StartMemoryMonitor(b.MemoryGauge(), nil, log.With("component", "alarm"))
	}
	if cn != nil {
		cn.run(b, cfg.Broker.DataDir)
	}
	ln, err := net.Listen("tcp", cfg.AMQPAddr)
	if err != nil {
		disk.Close()
		memory.Close()
		b.Close()
		closeWAL(qlog)
		if cn != nil {
			cn.close()
		}
		return nil, fmt.Errorf("listen for AMQP on %s: %w", cfg.AMQPAddr, err)
	}
	tlsLn, err := listenAMQPS(cfg)
	if err != nil {
		ln.Close()
		disk.Close()
		memory.Close()
		b.Close()
		if cn != nil {
			cn.close()
		}
		return nil, err
	}
	n := &Node{
		cfg:     cfg,
		log:     log,
		store:   store,
		broker:  b,
		qlog:    qlog,
		cluster: cn,
		server:  server.New(cfg.Server, b, log.With("component", "amqp")),
		ln:      ln,
		tlsLn:   tlsLn,
		disk:    disk,
		memory:  memory,
		served:  make(chan struct{}),
		started: time.Now(),
	}
	// A deleted user's or vhost's connections close on every node, as
	// the deletion reaches it (broker/access.go).
	b.OnRevoke(func(r broker.Revocation) { n.server.CloseConnections(r.User, r.Vhost, r.Reason) })
	if cn != nil {
		n.connectCluster()
	}
	waitCtx, stopWaiting := context.WithCancel(context.Background())
	n.stopWaiting = stopWaiting
	if err := n.serveAdmin(cfg); err != nil { // standalone_admin.go
		ln.Close()
		closeListener(tlsLn)
		close(n.served)
		n.Close(context.Background())
		return nil, err
	}
	go n.serve(waitCtx)
	return n, nil
}

// openStore opens the node's metadata store: a cluster member's
// metadata group, started with the rest of its cluster side (which cfg's
// broker then reaches the cluster through), or a standalone node's file.
// migrate is a standalone node's metadata carried into a cluster of one
// (checkDataDir), whose file is retired once the cluster has started.
//
// A standalone node's replicated queues share one write-ahead log, which
// the node opens and hands the broker (a cluster member's is its
// clusterNode's); qlog is it, nil on a member.
func openStore(cfg *Config, migrate *catalog.Snapshot, log *slog.Logger) (store catalog.Store, cn *clusterNode, qlog *wal.Log, err error) {
	if cfg.Cluster == nil {
		bolt, err := catalog.OpenBolt(cfg.DataDir)
		if err != nil {
			return nil, nil, nil, err
		}
		qlog, err = replica.OpenNodeWAL(cfg.DataDir, log.With("component", "wal"), cfg.OnStorageFailure)
		if err != nil {
			bolt.Close()
			if replica.IsDamaged(err) {
				return nil, nil, nil, fmt.Errorf("open the queues' write-ahead log: %w; a standalone node has no other member to re-sync its queues from (docs/storage.md)", err)
			}
			return nil, nil, nil, fmt.Errorf("open the queues' write-ahead log: %w", err)
		}
		cfg.Broker.Replica.WAL = qlog
		return bolt, nil, qlog, nil
	}
	cn, err = startCluster(*cfg.Cluster, cfg.DataDir, cfg.AMQPAddr, migrate, cfg.OnStorageFailure, log)
	if err != nil {
		return nil, nil, nil, err
	}
	if migrate != nil {
		if err := retireStandalone(cfg.DataDir, log); err != nil {
			cn.meta.Close()
			cn.close()
			return nil, nil, nil, err
		}
	}
	cfg.Broker.NodeID = cfg.Cluster.NodeName
	cfg.Broker.Cluster = cn
	return metaStore{cn.meta}, cn, nil, nil
}

// connectCluster connects a cluster member's AMQP server, broker and
// cluster side once all three exist: replies and client counts across
// nodes, the admin service's backend, and maintenance mode.
func (n *Node) connectCluster() {
	cn, b := n.cluster, n.broker
	n.server.SetReplyRelay(cn)               // replyto.go
	cn.fwd.SetReplies(n.server.DeliverReply) // replies for this node's requesters
	cn.admin.set(newAdminBackend(n, cn, b))
	cn.adminSrv.SetUsers(operators{b}) // operators.go
	b.OnDrainChange(cn.drainChanged)   // drain.go
	n.startMaintenance()               // drain.go
	// Vhost and user limits count clients on every node, as
	// RabbitMQ's connection and channel tracking do.
	n.server.SetClientCounter(func(vhost, user string) server.ClientCount {
		ctx, cancel := context.WithTimeout(context.Background(), connectionCountWait)
		defer cancel()
		return cn.adminSrv.CountClients(ctx, vhost, user)
	})
}

// serve accepts clients on n.ln until the node shuts down, and closes
// n.served when done. A cluster member accepts them once it is ready, as
// RabbitMQ listens only once booted: until it has caught up, a restarted
// node's model is its last metadata snapshot replaying what changed
// since, and it would log in users deleted since, route by bindings
// removed since, and so on. Their connections wait in the listen backlog
// meanwhile (about a second after a restart). waitCtx ends that wait.
func (n *Node) serve(waitCtx context.Context) {
	defer close(n.served)
	if n.cluster != nil {
		if err := n.Ready(waitCtx); err != nil {
			n.serveErr = server.ErrServerClosed
			n.ln.Close()
			closeListener(n.tlsLn)
			return
		}
	}
	if n.tlsLn != nil {
		go func() {
			n.server.Serve(n.tlsLn)
			n.tlsLn.Close()
		}()
	}
	n.serveErr = n.server.Serve(n.ln)
	// Shut down before Serve took the listener: it is still open.
	n.ln.Close()
}

// AMQPAddr is the address the node listens on.
func (n *Node) AMQPAddr() net.Addr { return n.ln.Addr() }

// Broker is the node's broker model.
func (n *Node) Broker() *broker.Broker { return n.broker }

// Connections lists the node's client connections with their channels
// and consumers (warrenctl list connections, channels, consumers).
func (n *Node) Connections() []server.ConnectionInfo { return n.server.Connections() }

// Done is closed when the node stops accepting connections.
func (n *Node) Done() <-chan struct{} { return n.served }

// Close closes client connections, waits for them within ctx, and closes
// the node's data.
func (n *Node) Close(ctx context.Context) error {
	n.stopWaiting()
	n.broker.Stopping()
	err := n.server.Shutdown(ctx)
	<-n.served
	if n.cluster != nil {
		n.cluster.handOff(handOffTimeout)
	}
	if n.serveErr != nil && !errors.Is(n.serveErr, server.ErrServerClosed) {
		err = errors.Join(err, n.serveErr)
	}
	n.disk.Close()
	n.memory.Close()
	err = errors.Join(err, n.admin.close(), n.broker.Close(), closeWAL(n.qlog)) // the queues first
	if n.cluster != nil {
		err = errors.Join(err, n.cluster.close())
	}
	return err
}

// closeWAL closes a standalone node's write-ahead log, if any, once the
// broker has closed the queues that write to it.
func closeWAL(qlog *wal.Log) error {
	if qlog == nil {
		return nil
	}
	return qlog.Close()
}

// DiskMonitor watches the free space of the node's data directory.
func (n *Node) DiskMonitor() *alarm.DiskMonitor { return n.disk }

// Ready waits until the node can serve clients: on a cluster member, until
// the cluster has formed and this node holds its metadata. A standalone
// node is ready when Start returns.
func (n *Node) Ready(ctx context.Context) error {
	if n.cluster == nil {
		return nil
	}
	return waitReady(ctx, func() bool { return n.cluster.ready(n.broker) })
}

// InternalAddr is the cluster member's internal (gRPC) address, nil on a
// standalone node.
func (n *Node) InternalAddr() net.Addr {
	if n.cluster == nil {
		return nil
	}
	return n.cluster.ln.Addr()
}

// Name is the node's cluster name ("" when standalone).
func (n *Node) Name() string {
	if n.cluster == nil {
		return ""
	}
	return n.cluster.self
}

// GossipAddr is the cluster member's gossip address ("" when standalone).
func (n *Node) GossipAddr() string {
	if n.cluster == nil {
		return ""
	}
	return n.cluster.gossip.LocalAddr()
}

// LeadingQueues counts this node's queue replicas that lead their group.
func (n *Node) LeadingQueues() int {
	if n.cluster == nil {
		return 0
	}
	return len(n.cluster.host.leading())
}

// PeerConnections is the number of gRPC connections this node holds to
// its peers: at most two per peer, whatever the number of queues.
func (n *Node) PeerConnections() int {
	if n.cluster == nil {
		return 0
	}
	return n.cluster.pool.Len()
}

// localReplica is this node's replica of queue name in vhost, if any.
func (n *Node) localReplica(vhost, name string) (*replica.Replica, string, bool) {
	if n.cluster == nil {
		return nil, "", false
	}
	rec, ok := n.broker.QueueRecord(vhost, name)
	if !ok {
		return nil, "", false
	}
	r, ok := n.cluster.host.get(rec.ID)
	return r, rec.ID, ok
}

// QueueMember is this node's replica's own view of queue name's group.
func (n *Node) QueueMember(vhost, name string) (replica.MemberStatus, bool) {
	r, _, ok := n.localReplica(vhost, name)
	if !ok {
		return replica.MemberStatus{}, false
	}
	return r.Status(), true
}

// TransferLeadership moves the leadership of queue name to node to. This
// node's replica must lead the queue.
func (n *Node) TransferLeadership(vhost, name, to string) error {
	r, _, ok := n.localReplica(vhost, name)
	if !ok {
		return fmt.Errorf("node %s holds no replica of queue %q in vhost %q", n.Name(), name, vhost)
	}
	addr, ok := n.cluster.addrOf(to)
	if !ok {
		return fmt.Errorf("unknown node %q", to)
	}
	return r.TransferLeadership(to, addr)
}
