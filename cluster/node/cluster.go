package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
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
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
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

// clusterNode is the node's part in a cluster: the internal gRPC server,
// the peers' connections, the Raft transport shared by every group, the
// metadata group, gossip membership, and this node's queue replicas.
type clusterNode struct {
	cfg  ClusterConfig
	log  *slog.Logger
	self string
	// boot is this start of the node (membership.Meta.Boot); the
	// consumers of its channels carry it in their IDs (replica.NodeTag).
	boot string
	// boots is the boot gossip last reported for each node, and gone the
	// node starts seen restarted or departed since (failover.go).
	bootsMu sync.Mutex
	boots   map[string]string
	gone    goneStarts
	addr    string // advertised internal address
	ln      net.Listener
	grpc    *grpc.Server
	pool    *rpc.Pool
	mux     *transport.Mux
	meta    *metaraft.Store
	gossip  *membership.Membership
	fwd     *forward.Server
	// admin answers warrenctl once the broker exists (run).
	admin lateBackend

	// qlog holds every local queue group's Raft log: their writes share
	// transactions and fsyncs. Closed after the broker.
	qlog *wal.Log

	// adminSrv is the admin service, also used by the automatic
	// rebalance after a node rejoins (reconcile.go).
	adminSrv *admin.Server
	// rec is the reconciler's state (reconcile.go).
	rec reconciler

	// memberMu serializes the membership changes this node drives
	// (membership.go).
	memberMu sync.Mutex

	mu       sync.Mutex
	replicas map[string]*replica.Replica // this node's members, by queue ID
	// groupMu keeps removeOrphans from dropping a group while a replica
	// opens it: openReplica holds it throughout.
	groupMu sync.Mutex
	queues  map[string]*clusterQueue // by queue ID
	// asleep are this node's replicas closed while their group
	// hibernates, by queue ID (hibernate.go); never in replicas as well.
	asleep map[string]*sleeper
	// slept counts the replicas closed since the hibernation loop last
	// looked (hibernate.go); opened counts the replicas opened since.
	slept  atomic.Int64
	opened atomic.Int64

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
func startCluster(cfg ClusterConfig, dataDir, amqpAddr string, seed *catalog.Snapshot, log *slog.Logger) (*clusterNode, error) {
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
		cfg:      cfg,
		log:      log.With("component", "cluster"),
		self:     cfg.NodeName,
		boot:     newBoot(),
		boots:    make(map[string]string),
		addr:     addr,
		ln:       ln,
		grpc:     grpc.NewServer(sec.ServerOptions()...),
		pool:     rpc.NewPool(sec.DialOptions()...),
		replicas: make(map[string]*replica.Replica),
		queues:   make(map[string]*clusterQueue),
		asleep:   make(map[string]*sleeper),
		stop:     make(chan struct{}),
		rec:      newReconciler(),
	}
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
		HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout,
	})
	if err != nil {
		c.closeTransport()
		return nil, fmt.Errorf("open metadata group: %w", err)
	}
	c.meta.Register(c.grpc)
	c.fwd = forward.NewServer(c.lookupReplica, log.With("component", "forward"))
	c.fwd.SetAsleep(c.isAsleep) // hibernate.go
	c.fwd.SetDeliveryLinger(c.deliveryLinger())
	c.fwd.SetNodeAlive(func(node string) bool {
		if c.gossip == nil {
			return false
		}
		m, ok := c.gossip.Member(node)
		return ok && m.State == membership.Alive
	})
	c.fwd.SetStartGone(func(consumer uint64) bool { return c.startGone(replica.ConsumerTag(consumer)) })
	c.mux.SetOnMissing(func(group string) { c.wake(group) })
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
		Meta:          membership.Meta{Name: c.self, AMQP: amqpAddr, Internal: addr, Gossip: gossipAddr, Version: cfg.Version, Boot: c.boot, QueueMachine: c.queueMachine()},
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
	c.qlog, err = replica.OpenNodeWAL(dataDir, log.With("component", "wal"))
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
	c.wg.Add(7)
	go c.announceAlarms(b.Alarms()) // alarms.go
	go c.hibernateLoop()            // hibernate.go
	go c.catchUpOnStart()
	go c.join()
	go c.lead(b)
	go c.reconcileLoop(b) // reconcile.go
	go c.removeOrphans(dataDir)
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
			restarted := c.memberEvent(ev)
			c.reconcileEvent(ev, restarted) // reconcile.go: joins and rejoins trigger it
			c.upgradeEvent(ev)              // machines.go
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

// OpenQueue implements broker.Cluster.
func (c *clusterNode) OpenQueue(rec catalog.Queue, cfg replica.Config) (queue.Queue, error) {
	members := rec.Members
	if len(members) == 0 {
		members = []string{c.self} // a record from before clustering
	}
	rcfg := forward.RouterConfig{
		QueueID: rec.ID, Name: cfg.Name, Members: members, Self: c.self, SelfBoot: replica.BootOf(c.self, c.boot),
		Addr: c.addrOf, Pool: c.pool, PublishTimeout: c.cfg.PublishTimeout,
		Log:    cfg.Log,
		Wake:   func() { c.wake(rec.ID) },
		Asleep: func() bool { return c.isAsleep(rec.ID) },
	}
	var local *replica.Replica
	var restored *sleeper
	member := slices.Contains(members, c.self)
	if member && c.cfg.HibernateAfter > 0 {
		// Closed when the group hibernated, and nothing since: it stays
		// closed until something needs it (hibernate.go).
		if s, ok := c.restoredSleeper(cfg.WALGroup()); ok {
			restored = &s
		}
	}
	if member && restored == nil {
		var err error
		// The member chosen to lead bootstraps a new group and
		// campaigns; the others keep the same configuration, to
		// bootstrap with should it die before they have heard from it
		// (replica's bootstrapLate): otherwise a queue whose first
		// leader died right after the declaration had no leader until
		// that node came back.
		chosen := rec.Leader == c.self || (rec.Leader == "" && members[0] == c.self)
		if local, err = c.openReplica(rec.ID, cfg, members, true, !chosen); err != nil {
			return nil, err
		}
		rcfg.Local = local
	}
	r := forward.NewRouter(rcfg)
	// cfg is kept to open a replica here later, should this node become
	// a member (membership.go) or its group wake (hibernate.go).
	q := &clusterQueue{Router: r, c: c, id: rec.ID, cfg: cfg, members: slices.Clone(members)}
	c.mu.Lock()
	if local != nil {
		c.replicas[rec.ID] = local
	}
	if restored != nil {
		c.asleep[rec.ID] = restored
	}
	c.queues[rec.ID] = q
	c.mu.Unlock()
	return q, nil
}

// openReplica opens this node's member of group id, whose members are
// members; bootstrap creates the group when the member has no state, and
// follow leaves the first election to another member.
func (c *clusterNode) openReplica(id string, cfg replica.Config, members []string, bootstrap, follow bool) (*replica.Replica, error) {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	trans, err := c.mux.Transport(id)
	if err != nil {
		return nil, err
	}
	cfg.Transport = trans
	cfg.SeesAlive = c.seesAlive
	cfg.LeadsAt = func(ctx context.Context, node string) (bool, error) { return c.leadsAt(ctx, node, id) }
	cfg.SettleAtLeader = func(list []replica.HeldSettlement) { c.settleAtLeader(id, list) }
	cfg.SettleDeliveriesAtLeader = func(op raftq.Op, cause queue.ReturnCause, deliveries []uint64) {
		if q := c.router(id); q != nil {
			q.Router.SettleDeliveriesAtLeader(op, cause, deliveries)
		}
	}
	cfg.StartAlive = c.startAlive
	cfg.StartGone = c.startGone
	cfg.MachineVersion = c.machineVersion
	if c.cfg.QueueMachineVersion > 0 {
		cfg.AppliesUpTo = uint32(c.queueMachine())
	}
	cfg.Bootstrap, cfg.Follow = bootstrap, follow
	cfg.Rebootstrap = func(members []string) { c.rebootstrap(id, members) }
	cfg.Peers = nil
	for _, m := range members {
		addr, _ := c.addrOf(m)
		cfg.Peers = append(cfg.Peers, replica.Peer{ID: m, Addr: addr})
	}
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = c.queueTimeout(), c.queueTimeout()
	// A member opened on a drained node (a restart in maintenance, a
	// group that wakes, a member added) must not campaign before the
	// maintenance loop's next turn (drain.go). The queues a node opens
	// as it starts come before it has the model, from the broker, which
	// sets Drained itself.
	if b := c.model.Load(); b != nil {
		cfg.Drained = b.Draining(c.self)
	}
	// A leader heartbeats each follower a tenth to a fifth of the
	// timeout after the last answer. Holding each heartbeat up to half
	// the timeout, to go out with every other queue's to the same peer
	// (the transport's heartbeat.go), makes idle groups heartbeat about
	// three times less often and in one call per peer. The gap between
	// answers, at most seven tenths of the timeout, stays inside the
	// followers' timeout and the leader's lease (replica.Open), both the
	// whole timeout.
	trans.SetHeartbeatLinger(c.queueTimeout() / 2)
	// Followers a commit does not need get their entries in batches of
	// up to the delay's worth (the transport's spare.go).
	trans.SetSpareDelay(c.spareFollowerDelay())
	// Replication to a node that is down waits for it rather than
	// failing into raft's backoff (the transport's SetPeerWait), so a
	// restarted node's replicas catch up as soon as it is back.
	trans.SetPeerWait(peerWait)
	// The group's log goes in the node's write-ahead log, named like its
	// directory (removeOrphans relies on that).
	cfg.WAL = c.qlog
	local, err := replica.Open(cfg)
	if err != nil {
		trans.Close()
		return nil, err
	}
	if cfg.Drained {
		local.SetDrained(true) // and its timeouts raised
	}
	c.opened.Add(1)
	return local, nil
}

// rebootstrap opens this node's member of a new group id again to write
// the group's first configuration, with members as its voters (replica's
// Config.Rebootstrap): it voted for the member chosen to lead, which
// failed before its first entries arrived here.
func (c *clusterNode) rebootstrap(id string, members []string) {
	q := c.router(id)
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	old, open := c.replica(id)
	if !open || old.LastIndex() != 0 {
		return // gone, or it heard from the group meanwhile
	}
	q.setLocalLocked(nil)
	old.Close()
	cfg := q.cfg
	cfg.Rebootstrapped = true
	r, err := c.openReplica(id, cfg, members, true, true)
	if err != nil {
		c.log.Error("cannot open the queue's member again to write its first configuration", "queue", q.cfg.Name, "err", err)
		return
	}
	q.setLocalLocked(r)
	c.log.Info("opened the queue's member again with its first configuration; it elects with the others", "queue", q.cfg.Name)
}

// settleAtLeader passes settlements of deliveries this node's member of
// group id made while it led on to the group's leader, through the
// queue's router.
func (c *clusterNode) settleAtLeader(id string, list []replica.HeldSettlement) {
	if q := c.router(id); q != nil {
		q.Router.SettleHeld(list)
	}
}

// router is group id's router on this node, nil if none.
func (c *clusterNode) router(id string) *clusterQueue {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queues[id]
}

// lookupReplica is the forward service's lookup: this node's replica of
// group id, woken if it hibernates.
func (c *clusterNode) lookupReplica(id string) (forward.Local, bool) {
	r, ok := c.wake(id)
	if !ok {
		return c.servedQueue(id)
	}
	return r, true
}

func (c *clusterNode) forget(id string) {
	c.mu.Lock()
	delete(c.replicas, id)
	delete(c.queues, id)
	delete(c.asleep, id)
	c.mu.Unlock()
}

// clusterQueue is a replicated queue's engine on this node: the router,
// unregistered from the node when deleted or closed.
type clusterQueue struct {
	*forward.Router
	c  *clusterNode
	id string
	// cfg opens this node's replica when the node joins the group
	// (MembersChanged, membership.go) or the group wakes (hibernate.go);
	// mu serializes such changes, and members, the group's members as
	// last set, is under it.
	cfg     replica.Config
	mu      sync.Mutex
	members []string
}

// A closing channel releases its consumers through the router.
var _ queue.Releaser = (*clusterQueue)(nil)

func (q *clusterQueue) Delete(ifUnused, ifEmpty bool) (uint32, error) {
	// A hibernating member opens to be deleted with its files, and to
	// count what the queue holds for delete-ok.
	q.c.wake(q.id)
	n, err := q.Router.Delete(ifUnused, ifEmpty)
	if err == nil {
		q.c.forget(q.id)
	}
	return n, err
}

func (q *clusterQueue) Close() {
	q.Router.Close()
	q.c.forget(q.id)
}

// handOffTimeout is how long a node tries to hand off its leaderships
// before it stops (all of them) or while it drains (each one): a transfer
// whose target does not win takes an election timeout.
const handOffTimeout = 5 * time.Second

// handOff moves the leadership of every queue this node leads to another
// member before it stops, so that clients see a leader change at once
// instead of an election timeout later. It waits at most timeout; the
// groups that did not move elect a new leader when this node is gone.
func (c *clusterNode) handOff(timeout time.Duration) {
	leading := c.leadingReplicas()
	if len(leading) == 0 || c.cfg.NoHandOffOnStop {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	var moved, failed atomic.Int64
	sem := make(chan struct{}, 16)
	for _, r := range leading {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				failed.Add(1)
				return
			}
			defer func() { <-sem }()
			switch err := c.handOffUndrained(ctx, r, true); {
			case errors.Is(err, replica.ErrNoTarget):
				// A group of one (a cluster of one), or one whose
				// other members' nodes are gone, has nobody to hand
				// to.
			case err != nil:
				failed.Add(1)
				c.log.Warn("queue leadership not handed off before stopping; its other members elect when this node is gone",
					"queue", r.Name(), "err", err)
			default:
				moved.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := moved.Load(); n > 0 {
		c.log.Info("handed off queue leadership before stopping", "queues", n)
	}
	if n := failed.Load(); n > 0 {
		c.log.Warn("not every queue's leadership moved before stopping", "queues", n)
	}
}

// canLead reports whether node may take a leadership this node hands
// off: gossip sees it alive and not leaving. Asking a node that is gone
// fails only after raft's election timeout (30 s for queue groups by
// default), longer than a stop waits.
func (c *clusterNode) canLead(node string) bool {
	m, ok := c.gossip.Member(node)
	return ok && m.State == membership.Alive && !m.Leaving
}

// handOffUndrained hands r's leadership to a member whose node may lead
// and is not drained: a drained node would only hand it on again, and two
// drained nodes would pass it back and forth. With orDrained, a drained
// node takes it when no other can (a stopping node: better a leader that
// moves on later than none until an election).
func (c *clusterNode) handOffUndrained(ctx context.Context, r *replica.Replica, orDrained bool) error {
	err := r.HandOff(ctx, func(node string) bool { return c.canLead(node) && !c.drained(node) })
	if errors.Is(err, replica.ErrNoTarget) && orDrained {
		err = r.HandOff(ctx, c.canLead)
	}
	return err
}

// removeOrphans deletes the Raft groups of queues this node no longer
// holds: a queue deleted while the node was down. A restarted node's
// metadata copy is only its last snapshot until it hears the commit index
// from the metadata leader, so it first catches up with everything
// committed (retrying until the cluster answers). Then the groups are
// listed, and the records read from the metadata store's applied state,
// which is at least as new as the broker's (a node creates a group only
// after its broker applied the queue's record): a listed group without a
// record naming this node belongs to a queue that is gone. A group with
// an open replica is left to the broker, which removes it when it applies
// the deletion.
func (c *clusterNode) removeOrphans(dataDir string) {
	defer c.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.meta.CatchUp(ctx)
		cancel()
		if err == nil {
			break
		}
		c.log.Debug("catch up with the metadata before removing deleted queues' groups", "err", err)
		select {
		case <-c.stop:
			return
		case <-time.After(time.Second):
		}
	}
	// No replica opens meanwhile; one that is open (or opened before) has
	// its transport registered and is kept below.
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	dir := filepath.Join(dataDir, "quorum")
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		c.log.Warn("list the queues' groups", "err", err)
		return
	}
	groups := c.qlog.Groups()
	snap, err := c.meta.Load()
	if err != nil {
		c.log.Warn("read the queue records", "err", err)
		return
	}
	keep := map[string]bool{}
	for _, q := range snap.Queues {
		if q.ID != "" && slices.Contains(q.Members, c.self) {
			keep[q.ID] = true
		}
	}
	c.mu.Lock()
	for id := range c.replicas {
		keep[id] = true
	}
	c.mu.Unlock()
	for _, id := range groups {
		if c.mux.Registered(id) {
			keep[id] = true
		}
	}
	for _, e := range entries {
		if c.mux.Registered(e.Name()) {
			keep[e.Name()] = true
		}
	}
	for _, e := range entries {
		if !e.IsDir() || keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			c.log.Warn("remove the group of a deleted queue", "dir", e.Name(), "err", err)
			continue
		}
		c.log.Info("removed the group of a queue deleted while this node was away", "group", e.Name())
	}
	for _, id := range groups {
		if keep[id] {
			continue
		}
		if err := c.qlog.DropGroup(id); err != nil {
			c.log.Warn("drop the log of a deleted queue", "group", id, "err", err)
		}
	}
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
			c.removeFormerMembers() // membership.go
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

// leadingReplicas are this node's replicas that lead their group now.
func (c *clusterNode) leadingReplicas() []*replica.Replica {
	var leading []*replica.Replica
	for _, r := range c.allReplicas() {
		if r.IsLeader() {
			leading = append(leading, r)
		}
	}
	return leading
}

// allReplicas is this node's replicas now, to act on without c.mu held.
func (c *clusterNode) allReplicas() []*replica.Replica {
	return slices.Collect(maps.Values(c.replicasByID()))
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
