package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/cluster/metaraft"
	"github.com/warrenmq/warren/cluster/pki"
	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/cluster/transport"
	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/raftq/replica"
	"github.com/warrenmq/warren/raftq/wal"
)

// ClusterConfig makes a node a cluster member.
type ClusterConfig struct {
	// NodeName is the node's name in the cluster (Raft server IDs, queue
	// members, warrenctl). It must stay the same across restarts.
	NodeName string
	// InternalAddr is where the node serves Raft, forwarding and admin
	// traffic (gRPC); AdvertiseAddr is how peers reach it, InternalAddr's
	// actual address when empty.
	InternalAddr, AdvertiseAddr string
	// GossipAddr is memberlist's address (TCP and UDP).
	GossipAddr string
	// Join are gossip addresses (host:port) or DNS names of other nodes.
	Join []string
	// BootstrapExpect forms a new cluster once this many nodes see each
	// other: the lowest-named of them creates the metadata group with all
	// of them. 0 only joins an existing cluster. A node with no Join
	// addresses and BootstrapExpect ≤ 1 forms a cluster of one.
	BootstrapExpect int
	// GossipKey encrypts gossip (16, 24 or 32 bytes) when set.
	GossipKey []byte
	// TLS, when set, secures the internal port with mutual TLS: peers
	// must present a node certificate from the cluster CA, operators a
	// client certificate or a user's credentials (cluster/rpc's
	// security.go). Nil runs it in plaintext.
	TLS *pki.Store
	// Version is reported to the other nodes.
	Version string
	// HeartbeatTimeout and ElectionTimeout of the metadata group; zero is
	// one second. Tests shorten them.
	HeartbeatTimeout, ElectionTimeout time.Duration
	// QueueTimeout is the heartbeat and election timeout of the queue
	// groups; zero is the longer of ten seconds and HeartbeatTimeout.
	// Idle groups heartbeat every tenth to fifth of it; gossip reporting
	// a node failed makes the groups it led elect at once (failover.go).
	QueueTimeout time.Duration
	// PublishTimeout bounds how long a publish forwarded to a queue's
	// leader may wait for its commit before the publisher gets basic.nack.
	PublishTimeout time.Duration
	// ProbeInterval and ProbeTimeout tune gossip's failure detection;
	// zero keeps memberlist's LAN defaults.
	ProbeInterval, ProbeTimeout time.Duration
	// Queue membership reconciliation and leader rebalancing after a
	// node rejoins, run by the metadata leader (reconcile.go); both are
	// on unless disabled. ReconcileInterval is the time between rounds
	// (zero: RabbitMQ's 60 minutes); ReconcileDelay is how long after a
	// trigger (a node joining or rejoining) a round or rebalance runs
	// (zero: RabbitMQ's trigger_interval, 10 seconds, at most the interval).
	NoQueueReconcile, NoRebalanceOnRejoin bool
	ReconcileInterval, ReconcileDelay     time.Duration
	// SpareFollowerDelay is how long a queue group's leader may hold
	// AppendEntries to the followers its commits do not need, so that
	// they store several entries with one sync (cluster/transport's
	// spare.go); zero is defaultSpareFollowerDelay, negative sends every
	// request at once.
	SpareFollowerDelay time.Duration
	// DeliveryLinger is how long a queue leader's stream to a consumer on
	// another node may hold a delivery for those that follow it
	// (cluster/forward's SetDeliveryLinger); zero is
	// defaultDeliveryLinger, negative sends each at once.
	DeliveryLinger time.Duration
	// HibernateAfter is how long a queue group whose queue is empty and
	// unused appends nothing before it closes on every member until it is
	// needed again (hibernate.go); zero never closes one.
	HibernateAfter time.Duration
	// QueueMachineVersion is the newest quorum queue machine version the
	// node announces (raftq/version.go), which its queues' leaders wait
	// for before raising a queue's; zero is raftq.MachineVersion. Tests
	// set 1 to stand in for a build from before machine versions: its
	// replicas then stop on an entry that needs a newer one, as that
	// build's do.
	QueueMachineVersion int
	// NoHandOffOnStop makes a graceful stop keep the leaderships it
	// holds, for tests of what the other members do when a hand-off
	// fails.
	NoHandOffOnStop bool
}

// clusterNode is the node's part in a cluster, and the core its other
// parts share (doc.go lists them): the internal gRPC server, the peers'
// connections, the Raft transport shared by every group, the metadata
// group and gossip membership. What each part keeps of its own (the
// replicas this node hosts, the hibernation counters, the membership
// changes under way, the reconciler's triggers, the node starts gossip
// reported) is in the part, under the part's lock.
type clusterNode struct {
	cfg  ClusterConfig
	log  *slog.Logger
	self string
	// boot is this start of the node (membership.Meta.Boot); the
	// consumers of its channels carry it in their IDs (replica.NodeTag).
	boot   string
	addr   string // advertised internal address
	ln     net.Listener
	grpc   *grpc.Server
	pool   *rpc.Pool
	mux    *transport.Mux
	meta   *metaraft.Store
	gossip *membership.Membership
	fwd    *forward.Server
	// admin answers warrenctl once the broker exists (run).
	admin lateBackend

	// qlog holds every local queue group's Raft log: their writes share
	// transactions and fsyncs. Closed after the broker.
	qlog *wal.Log

	// quar lists the queue members set aside after storage damage,
	// which do not vote until re-synced (quarantine.go, resync.go).
	quar *quarantine

	// adminSrv is the admin service, also used by the automatic
	// rebalance after a node rejoins (reconcile.go).
	adminSrv *admin.Server

	// host holds this node's queue replicas and routers (replicas.go).
	host *replicaHost
	// hib puts idle groups to sleep (hibernate.go).
	hib *hibernator
	// members drives the membership changes this node is asked for
	// (membership.go).
	members *queueMembership
	// failover reacts to gossip's news of other nodes' failures and
	// restarts (failover.go).
	failover *failover
	// rec is the reconciler's state (reconcile.go).
	rec *reconciler

	// model is the broker once run starts; placement reads the drained
	// nodes from it (drain.go).
	model atomic.Pointer[broker.Broker]

	stop chan struct{}
	wg   sync.WaitGroup
}

// startCluster brings up everything but the broker: the broker restores
// its queues through OpenQueue, which needs the transport and the peers.
// startCluster starts the node's cluster side. seed, if set, is a
// standalone node's metadata, which becomes the metadata group's first
// snapshot (datadir.go).
func startCluster(cfg ClusterConfig, dataDir, amqpAddr string, seed *catalog.Snapshot, onStorageFailure func(error), log *slog.Logger) (*clusterNode, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("cluster: a node name is required")
	}
	ln, err := net.Listen("tcp", cfg.InternalAddr)
	if err != nil {
		return nil, fmt.Errorf("listen for internal traffic on %s: %w", cfg.InternalAddr, err)
	}
	addr := cfg.AdvertiseAddr
	if addr == "" {
		addr = ln.Addr().String()
	}
	sec := &rpc.Security{TLS: cfg.TLS}
	c := &clusterNode{
		cfg:  cfg,
		log:  log.With("component", "cluster"),
		self: cfg.NodeName,
		boot: newBoot(),
		addr: addr,
		ln:   ln,
		grpc: grpc.NewServer(sec.ServerOptions()...),
		pool: rpc.NewPool(sec.DialOptions()...),
		stop: make(chan struct{}),
	}
	c.host = newReplicaHost(c)
	c.hib = &hibernator{c: c}
	c.members = &queueMembership{c: c}
	c.failover = newFailover(c)
	previous, err := recordBoot(dataDir, c.boot)
	if err != nil {
		c.log.Warn("could not record this start's boot; consumers of earlier starts may keep their messages until the disconnected timeout", "err", err)
	}
	for _, p := range previous {
		// This node's own earlier starts are over: their consumers'
		// messages return once a member here leads (boots.go).
		c.failover.noteGone(replica.BootOf(c.self, p))
	}
	c.rec = newReconciler(c)
	c.mux = transport.NewMux(addr, c.pool, log.With("component", "transport"))
	c.mux.Register(c.grpc)
	metaTrans, err := c.mux.Transport("meta")
	if err != nil {
		c.closeTransport()
		return nil, err
	}
	// As the queues' (openReplica): a node back from a stop gets the
	// metadata it missed at once, and with it its queues.
	metaTrans.SetPeerWait(peerWait)
	if seed != nil {
		if err := metaraft.SeedSnapshot(filepath.Join(dataDir, "meta"), c.self, addr, seed); err != nil {
			c.closeTransport()
			return nil, err
		}
	}
	c.meta, err = metaraft.Open(metaraft.Config{
		NodeID: c.self, Addr: addr, Dir: filepath.Join(dataDir, "meta"),
		Transport: metaTrans, Pool: c.pool, Log: log.With("component", "meta"),
		OnStorageFailure: onStorageFailure,
		HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout,
	})
	if err != nil {
		c.closeTransport()
		return nil, fmt.Errorf("open metadata group: %w", err)
	}
	c.meta.Register(c.grpc)
	c.fwd = forward.NewServer(c.host.lookup, log.With("component", "forward"))
	c.fwd.SetAsleep(c.host.isAsleep) // hibernate.go
	c.fwd.SetDeliveryLinger(c.deliveryLinger())
	c.fwd.SetNodeAlive(func(node string) bool {
		if c.gossip == nil {
			return false
		}
		m, ok := c.gossip.Member(node)
		return ok && m.State == membership.Alive
	})
	c.fwd.SetStartGone(func(consumer uint64) bool { return c.failover.startGone(replica.ConsumerTag(consumer)) })
	c.mux.SetOnMissing(func(group string) { c.host.wake(group) })
	c.fwd.Register(c.grpc)
	c.registerMember() // membership.go
	c.adminSrv = admin.NewServer(&c.admin, c.pool, log.With("component", "admin"))
	c.adminSrv.Register(c.grpc)
	sec.Authorize = c.adminSrv.Authorize // before serving: calls read it unlocked
	go c.grpc.Serve(ln)

	gossipAddr := cfg.GossipAddr
	if gossipAddr == "" {
		gossipAddr = "127.0.0.1:0"
	}
	c.gossip, err = membership.Start(membership.Config{
		Meta:          membership.Meta{Name: c.self, AMQP: amqpAddr, Internal: addr, Gossip: gossipAddr, Version: cfg.Version, Boot: c.boot, Previous: previous, QueueMachine: c.queueMachine()},
		BindAddr:      gossipAddr,
		SecretKey:     cfg.GossipKey,
		ProbeInterval: cfg.ProbeInterval,
		ProbeTimeout:  cfg.ProbeTimeout,
		Log:           log.With("component", "gossip"),
	})
	if err != nil {
		c.meta.Close()
		c.closeTransport()
		return nil, fmt.Errorf("start gossip: %w", err)
	}
	c.qlog, err = c.openQueuesLog(dataDir, onStorageFailure, log)
	if err != nil {
		c.gossip.Stop()
		c.meta.Close()
		c.closeTransport()
		return nil, fmt.Errorf("open the queues' log: %w", err)
	}
	return c, nil
}

// run starts the background work once the broker exists: joining,
// forming the cluster, and the metadata leader's duties.
func (c *clusterNode) run(b *broker.Broker, dataDir string) {
	c.model.Store(b) // drain.go
	// Other nodes' alarms follow gossip as it happens (alarms.go).
	c.gossip.OnEvent(func(ev membership.Event) { alarmEvent(b.Alarms(), ev) })
	c.wg.Add(8)
	go c.announceAlarms(b.Alarms()) // alarms.go
	go c.hib.loop()                 // hibernate.go
	go c.catchUpOnStart()
	go c.join()
	go c.lead(b)
	go c.rec.loop(b) // reconcile.go
	go c.host.removeOrphans(dataDir)
	go resyncer{c: c, b: b}.loop() // resync.go
}

// join contacts the seeds until gossip reaches at least one other node,
// then forms the metadata group if this node is the one to do it.
func (c *clusterNode) join() {
	defer c.wg.Done()
	seeds := slices.DeleteFunc(slices.Clone(c.cfg.Join), func(s string) bool { return s == "" || s == c.cfg.GossipAddr })
	for len(seeds) > 0 {
		n, err := c.gossip.Join(seeds)
		if err == nil && n > 0 {
			break
		}
		c.log.Debug("joining", "seeds", seeds, "err", err)
		if !c.sleep(time.Second) {
			return
		}
	}
	if c.meta.HasState() {
		return // formed before: Raft finds the others by itself
	}
	expect := c.cfg.BootstrapExpect
	if len(seeds) == 0 && expect <= 1 {
		c.bootstrap([]membership.Member{{Meta: membership.Meta{Name: c.self, Internal: c.addr}}})
		return
	}
	if expect <= 0 {
		return // joins an existing cluster: its leader adds this node
	}
	for {
		if leader, _ := c.meta.Leader(); leader != "" {
			return // formed by another node, which included this one
		}
		alive := c.aliveMembers()
		if len(alive) >= expect {
			first := alive[:expect]
			if first[0].Name == c.self {
				c.bootstrap(first)
			}
			return
		}
		if !c.sleep(200 * time.Millisecond) {
			return
		}
	}
}

func (c *clusterNode) bootstrap(ms []membership.Member) {
	servers := make([]metaraft.Server, 0, len(ms))
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		if err := c.proven(m); err != nil { // admit.go
			c.log.Error("cannot form the cluster: a node could not prove its identity", "node", m.Name, "err", err)
			return
		}
		servers = append(servers, metaraft.Server{ID: m.Name, Addr: m.Internal, Voter: true})
		names = append(names, m.Name)
	}
	if err := c.meta.Bootstrap(servers); err != nil {
		c.log.Error("cannot form the cluster", "err", err)
		return
	}
	c.log.Info("formed a new cluster", "nodes", names)
}

// lead carries out the metadata leader's duties: seeding a new cluster
// from the configuration, and adding the nodes gossip finds to the
// metadata group (voters up to five, the rest non-voters).
func (c *clusterNode) lead(b *broker.Broker) {
	defer c.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		case ev := <-c.gossip.Events():
			restarted := c.failover.event(ev)
			c.rec.event(ev, restarted) // reconcile.go: joins and rejoins trigger it
			c.upgradeEvent(ev)         // machines.go
		}
		if !c.meta.IsLeader() {
			continue
		}
		if err := b.SeedIfEmpty(); err != nil {
			c.log.Warn("seed metadata", "err", err)
		}
		servers, err := c.meta.Servers()
		if err != nil {
			continue
		}
		for _, m := range c.aliveMembers() {
			if slices.ContainsFunc(servers, func(s metaraft.Server) bool { return s.ID == m.Name }) {
				continue
			}
			if err := c.proven(m); err != nil { // admit.go
				c.log.Warn("not admitting a node that could not prove its identity", "node", m.Name, "err", err)
				continue
			}
			if err := c.meta.AddServer(m.Name, m.Internal); err != nil {
				c.log.Warn("add node to the metadata group", "node", m.Name, "err", err)
				continue
			}
			c.log.Info("node joined the cluster", "node", m.Name, "addr", m.Internal)
		}
	}
}

func (c *clusterNode) sleep(d time.Duration) bool {
	select {
	case <-c.stop:
		return false
	case <-time.After(d):
		return true
	}
}

// aliveMembers are the nodes gossip sees alive, sorted by name.
func (c *clusterNode) aliveMembers() []membership.Member {
	var alive []membership.Member
	for _, m := range c.gossip.Members() {
		if m.State == membership.Alive && !m.Leaving {
			alive = append(alive, m)
		}
	}
	slices.SortFunc(alive, func(a, b membership.Member) int { return strings.Compare(a.Name, b.Name) })
	return alive
}

// gossipSeesAlive reports whether this node's gossip sees node alive.
func (c *clusterNode) gossipSeesAlive(node string) bool {
	m, ok := c.gossip.Member(node)
	return ok && m.State == membership.Alive
}

// addrOf is a node's internal address: from gossip while it is alive,
// else from the metadata group's configuration.
func (c *clusterNode) addrOf(node string) (string, bool) {
	if node == c.self {
		return c.addr, true
	}
	if m, ok := c.gossip.Member(node); ok && m.Internal != "" {
		return m.Internal, true
	}
	if servers, err := c.meta.Servers(); err == nil {
		for _, s := range servers {
			if s.ID == node {
				return s.Addr, true
			}
		}
	}
	return "", false
}

// PlacementNodes implements broker.Cluster: nodes in the metadata group
// that gossip sees alive and that are not drained (drain.go; this node
// too, should it be drained).
func (c *clusterNode) PlacementNodes() []string {
	servers, err := c.meta.Servers()
	if err != nil {
		return []string{c.self}
	}
	var nodes []string
	for _, m := range c.aliveMembers() {
		if slices.ContainsFunc(servers, func(s metaraft.Server) bool { return s.ID == m.Name }) && !c.drained(m.Name) {
			nodes = append(nodes, m.Name)
		}
	}
	if !slices.Contains(nodes, c.self) && !c.drained(c.self) {
		nodes = append(nodes, c.self)
		slices.Sort(nodes)
	}
	return nodes
}

// ready reports whether the node has a metadata leader and a model with
// at least one vhost, caught up with the leader since it started: logins
// can succeed and the model routes as the cluster does.
func (c *clusterNode) ready(b *broker.Broker) bool {
	leader, _ := c.meta.Leader()
	return leader != "" && b.HasVhosts() && c.meta.CaughtUp()
}

// catchUpOnStart brings the model up to the cluster's metadata as soon as
// there is a leader to ask. A restarted node starts from what it held
// when it stopped; until this returns, lookups that miss catch up first
// (meta.Store.MayBeStale), and this makes the first of them cheap.
func (c *clusterNode) catchUpOnStart() {
	defer c.wg.Done()
	stopped, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-c.stop:
			stop()
		case <-stopped.Done():
		}
	}()
	for {
		ctx, cancel := context.WithTimeout(stopped, 10*time.Second)
		err := c.meta.CatchUp(ctx)
		cancel()
		if err == nil {
			c.host.removeFormerMembers() // membership.go
			return
		}
		c.log.Debug("catching up with the metadata after start", "err", err)
		if !c.sleep(time.Second) {
			return
		}
	}
}

// close stops the cluster side; the broker (and with it the metadata
// store and the queues) is closed before.
func (c *clusterNode) close() error {
	close(c.stop)
	c.wg.Wait()
	err := c.gossip.Leave(2 * time.Second)
	err = errors.Join(err, c.gossip.Stop())
	c.closeTransport()
	return errors.Join(err, c.qlog.Close())
}

func (c *clusterNode) closeTransport() {
	c.grpc.Stop()
	if c.fwd != nil {
		c.fwd.Close()
	}
	c.mux.Close()
	c.pool.Close()
}

// metaStore adapts the metadata group's store to the broker's Watchable.
type metaStore struct{ *metaraft.Store }

func (s metaStore) Subscribe(fn func(origin string, changes []catalog.Change, reset *catalog.Snapshot)) *catalog.Snapshot {
	snap, _ := s.Store.Subscribe(func(u metaraft.Update) { fn(u.Origin, u.Changes, u.Reset) })
	return snap
}

var _ broker.Watchable = metaStore{}

// waitReady waits until ready or ctx ends.
func waitReady(ctx context.Context, ready func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !ready() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// defaultSpareFollowerDelay is SpareFollowerDelay's default: at 1,000
// msg/s a spare follower syncs about 100 times a second instead of 1,000,
// and a commit waits on a spare at most this much longer when an eager
// follower stops answering (docs/performance.md; 10 ms took another 7%
// off the CPU per message against 5 ms, at the same confirm latency).
const defaultSpareFollowerDelay = 10 * time.Millisecond

// defaultDeliveryLinger is DeliveryLinger's default: at 1,000 msg/s to a
// consumer on another node, 4 ms took about a tenth off the cluster's CPU
// per message, and added about 3 ms to a message's way from publisher to
// consumer, whose p99 stayed at about 0.6 of RabbitMQ's on a quiet machine
// (docs/performance.md).
const defaultDeliveryLinger = 4 * time.Millisecond

// deliveryLinger is the configured DeliveryLinger, with its default.
func (c *clusterNode) deliveryLinger() time.Duration {
	return withDefault(c.cfg.DeliveryLinger, defaultDeliveryLinger)
}

// spareFollowerDelay is the configured SpareFollowerDelay, with its
// default.
func (c *clusterNode) spareFollowerDelay() time.Duration {
	return withDefault(c.cfg.SpareFollowerDelay, defaultSpareFollowerDelay)
}

// withDefault reads a duration setting whose zero means its default and
// whose negative values turn it off (0).
func withDefault(d, def time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d == 0:
		return def
	default:
		return d
	}
}
