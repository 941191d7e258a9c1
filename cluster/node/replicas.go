package node

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// replicaHost holds this node's side of its replicated queues: a router
// for each (queues), the replicas open here (replicas) and those closed
// while their group hibernates (asleep). A replica is in at most one of
// replicas and asleep; mu guards the three maps, and no other lock is
// taken under it. groupMu keeps removeOrphans from dropping a group while
// a replica opens it: openReplica holds it throughout, and takes mu under
// it. A queue's own lock (clusterQueue.mu) comes before both.
type replicaHost struct {
	c *clusterNode

	groupMu sync.Mutex

	mu       sync.Mutex
	queues   map[string]*clusterQueue    // by queue ID
	replicas map[string]*replica.Replica // this node's members, by queue ID
	asleep   map[string]*sleeper         // hibernating members, by queue ID (hibernate.go)
}

func newReplicaHost(c *clusterNode) *replicaHost {
	return &replicaHost{
		c:        c,
		queues:   make(map[string]*clusterQueue),
		replicas: make(map[string]*replica.Replica),
		asleep:   make(map[string]*sleeper),
	}
}

// OpenQueue implements broker.Cluster.
func (c *clusterNode) OpenQueue(rec catalog.Queue, cfg replica.Config) (queue.Queue, error) {
	return c.host.open(rec, cfg)
}

// member is this node's member of group id: its open replica, or its
// record of the replica closed while the group hibernates (at most one of
// them; neither when this node holds none).
func (h *replicaHost) member(id string) (*replica.Replica, *sleeper) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.replicas[id], h.asleep[id]
}

// members are this node's open replicas and hibernating members, by
// queue ID, to act on without h.mu held.
func (h *replicaHost) members() (map[string]*replica.Replica, map[string]*sleeper) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.replicas), maps.Clone(h.asleep)
}

// setOpen makes r this node's open replica of group id; nil: none.
func (h *replicaHost) setOpen(id string, r *replica.Replica) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r == nil {
		delete(h.replicas, id)
		return
	}
	h.replicas[id] = r
}

// open starts this node's side of queue rec (OpenQueue): its router,
// and its replica when this node is a member.
func (h *replicaHost) open(rec catalog.Queue, cfg replica.Config) (queue.Queue, error) {
	members := rec.Members
	if len(members) == 0 {
		members = []string{h.c.self} // a record from before clustering
	}
	rcfg := forward.RouterConfig{
		QueueID: rec.ID, Name: cfg.Name, Members: members, Self: h.c.self, SelfBoot: replica.BootOf(h.c.self, h.c.boot),
		Addr: h.c.addrOf, Pool: h.c.pool, PublishTimeout: h.c.cfg.PublishTimeout,
		Log:    cfg.Log,
		Wake:   func() { h.wake(rec.ID) },
		Asleep: func() bool { return h.isAsleep(rec.ID) },
	}
	var local *replica.Replica // nil if not a member, or quarantined as it opened
	var restored *sleeper
	member := slices.Contains(members, h.c.self)
	if member && h.c.quar.holds(rec.ID) {
		// Its storage was damaged: it re-syncs before it opens
		// (resync.go), never as the voter it was, nor as asleep.
		member = false
		h.c.quar.wake()
	}
	if member && h.c.cfg.HibernateAfter > 0 {
		// Closed when the group hibernated, and nothing since: it stays
		// closed until something needs it (hibernate.go).
		if s, ok := h.c.hib.restored(cfg.WALGroup()); ok {
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
		chosen := rec.Leader == h.c.self || (rec.Leader == "" && members[0] == h.c.self)
		local, err = h.openReplica(rec.ID, cfg, members, true, !chosen)
		if err != nil && !errors.Is(err, errQuarantined) {
			return nil, err
		}
		if local != nil {
			rcfg.Local = local // never an interface holding a nil *Replica
		}
	}
	r := forward.NewRouter(rcfg)
	// cfg is kept to open a replica here later, should this node become
	// a member (membership.go) or its group wake (hibernate.go).
	q := &clusterQueue{Router: r, c: h.c, id: rec.ID, cfg: cfg, members: slices.Clone(members)}
	h.mu.Lock()
	if local != nil {
		h.replicas[rec.ID] = local
	}
	if restored != nil {
		h.asleep[rec.ID] = restored
	}
	h.queues[rec.ID] = q
	h.mu.Unlock()
	return q, nil
}

// openReplica opens this node's member of group id, whose members are
// members; bootstrap creates the group when the member has no state, and
// follow leaves the first election to another member.
func (h *replicaHost) openReplica(id string, cfg replica.Config, members []string, bootstrap, follow bool) (*replica.Replica, error) {
	h.groupMu.Lock()
	defer h.groupMu.Unlock()
	trans, err := h.c.mux.Transport(id)
	if err != nil {
		return nil, err
	}
	cfg.Transport = trans
	cfg.SeesAlive = h.c.members.seesAlive
	cfg.LeadsAt = func(ctx context.Context, node string) (bool, error) { return h.c.members.leadsAt(ctx, node, id) }
	cfg.SettleAtLeader = func(list []replica.HeldSettlement) { h.settleAtLeader(id, list) }
	cfg.SettleDeliveriesAtLeader = func(op raftq.Op, cause queue.ReturnCause, deliveries []uint64) {
		if q := h.router(id); q != nil {
			q.Router.SettleDeliveriesAtLeader(op, cause, deliveries)
		}
	}
	cfg.StartAlive = h.c.failover.startAlive
	cfg.StartGone = h.c.failover.startGone
	cfg.MachineVersion = h.c.machineVersion
	if h.c.cfg.QueueMachineVersion > 0 {
		cfg.AppliesUpTo = uint32(h.c.queueMachine())
	}
	cfg.Bootstrap, cfg.Follow = bootstrap, follow
	cfg.Rebootstrap = func(members []string) { h.rebootstrap(id, members) }
	cfg.Peers = nil
	for _, m := range members {
		addr, _ := h.c.addrOf(m)
		cfg.Peers = append(cfg.Peers, replica.Peer{ID: m, Addr: addr})
	}
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = h.c.queueTimeout(), h.c.queueTimeout()
	// A member opened on a drained node (a restart in maintenance, a
	// group that wakes, a member added) must not campaign before the
	// maintenance loop's next turn (drain.go). The queues a node opens
	// as it starts come before it has the model, from the broker, which
	// sets Drained itself.
	if b := h.c.model.Load(); b != nil {
		cfg.Drained = b.Draining(h.c.self)
	}
	// A leader heartbeats each follower a tenth to a fifth of the
	// timeout after the last answer. Holding each heartbeat up to half
	// the timeout, to go out with every other queue's to the same peer
	// (the transport's heartbeat.go), makes idle groups heartbeat about
	// three times less often and in one call per peer. The gap between
	// answers, at most seven tenths of the timeout, stays inside the
	// followers' timeout and the leader's lease (replica.Open), both the
	// whole timeout.
	trans.SetHeartbeatLinger(h.c.queueTimeout() / 2)
	// Followers a commit does not need get their entries in batches of
	// up to the delay's worth (the transport's spare.go).
	trans.SetSpareDelay(h.c.spareFollowerDelay())
	// Replication to a node that is down waits for it rather than
	// failing into raft's backoff (the transport's SetPeerWait), so a
	// restarted node's replicas catch up as soon as it is back.
	trans.SetPeerWait(peerWait)
	// The group's log goes in the node's write-ahead log, named like its
	// directory (removeOrphans relies on that).
	cfg.WAL = h.c.qlog
	local, err := replica.Open(cfg)
	if err != nil {
		trans.Close()
		if replica.IsDamaged(err) {
			return nil, h.quarantineGroup(id, cfg.Dir, err) // resync.go
		}
		return nil, err
	}
	if cfg.Drained {
		local.SetDrained(true) // and its timeouts raised
	}
	h.c.hib.opened.Add(1)
	return local, nil
}

// rebootstrap opens this node's member of a new group id again to write
// the group's first configuration, with members as its voters (replica's
// Config.Rebootstrap): it voted for the member chosen to lead, which
// failed before its first entries arrived here.
func (h *replicaHost) rebootstrap(id string, members []string) {
	q := h.router(id)
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	old, open := h.get(id)
	if !open || old.LastIndex() != 0 {
		return // gone, or it heard from the group meanwhile
	}
	q.setLocalLocked(nil)
	old.Close()
	cfg := q.cfg
	cfg.Rebootstrapped = true
	r, err := h.openReplica(id, cfg, members, true, true)
	if err != nil {
		h.c.log.Error("cannot open the queue's member again to write its first configuration", "queue", q.cfg.Name, "err", err)
		return
	}
	q.setLocalLocked(r)
	h.c.log.Info("opened the queue's member again with its first configuration; it elects with the others", "queue", q.cfg.Name)
}

// settleAtLeader passes settlements of deliveries this node's member of
// group id made while it led on to the group's leader, through the
// queue's router.
func (h *replicaHost) settleAtLeader(id string, list []replica.HeldSettlement) {
	if q := h.router(id); q != nil {
		q.Router.SettleHeld(list)
	}
}

// router is group id's router on this node, nil if none.
func (h *replicaHost) router(id string) *clusterQueue {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queues[id]
}

// lookup is the forward service's lookup: this node's replica of
// group id, woken if it hibernates.
func (h *replicaHost) lookup(id string) (forward.Local, bool) {
	r, ok := h.wake(id)
	if !ok {
		return h.c.servedQueue(id)
	}
	return r, true
}

// forget drops every trace of group id here: its queue was deleted or
// closed (clusterQueue).
func (h *replicaHost) forget(id string) {
	h.mu.Lock()
	delete(h.replicas, id)
	delete(h.queues, id)
	delete(h.asleep, id)
	h.mu.Unlock()
}

// leading are this node's replicas that lead their group now.
func (h *replicaHost) leading() []*replica.Replica {
	var leading []*replica.Replica
	for _, r := range h.all() {
		if r.IsLeader() {
			leading = append(leading, r)
		}
	}
	return leading
}

// all is this node's replicas now, to act on without h.mu held.
func (h *replicaHost) all() []*replica.Replica {
	return slices.Collect(maps.Values(h.byID()))
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
func (h *replicaHost) removeOrphans(dataDir string) {
	defer h.c.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := h.c.meta.CatchUp(ctx)
		cancel()
		if err == nil {
			break
		}
		h.c.log.Debug("catch up with the metadata before removing deleted queues' groups", "err", err)
		select {
		case <-h.c.stop:
			return
		case <-time.After(time.Second):
		}
	}
	// No replica opens meanwhile; one that is open (or opened before) has
	// its transport registered and is kept below.
	h.groupMu.Lock()
	defer h.groupMu.Unlock()
	dir := filepath.Join(dataDir, "quorum")
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		h.c.log.Warn("list the queues' groups", "err", err)
		return
	}
	groups := h.c.qlog.Groups()
	snap, err := h.c.meta.Load()
	if err != nil {
		h.c.log.Warn("read the queue records", "err", err)
		return
	}
	keep := map[string]bool{}
	for _, q := range snap.Queues {
		if q.ID != "" && slices.Contains(q.Members, h.c.self) {
			keep[q.ID] = true
		}
	}
	h.mu.Lock()
	for id := range h.replicas {
		keep[id] = true
	}
	h.mu.Unlock()
	for _, id := range groups {
		if h.c.mux.Registered(id) {
			keep[id] = true
		}
	}
	for _, e := range entries {
		if h.c.mux.Registered(e.Name()) {
			keep[e.Name()] = true
		}
	}
	for _, e := range entries {
		if !e.IsDir() || keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			h.c.log.Warn("remove the group of a deleted queue", "dir", e.Name(), "err", err)
			continue
		}
		h.c.log.Info("removed the group of a queue deleted while this node was away", "group", e.Name())
	}
	for _, id := range groups {
		if keep[id] {
			continue
		}
		if err := h.c.qlog.DropGroup(id); err != nil {
			h.c.log.Warn("drop the log of a deleted queue", "group", id, "err", err)
		}
	}
}

// byID is this node's open replicas by queue ID, to act on
// without h.mu held.
func (h *replicaHost) byID() map[string]*replica.Replica {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]*replica.Replica, len(h.replicas))
	for id, r := range h.replicas {
		out[id] = r
	}
	return out
}

// get is this node's open replica of group id, if any.
func (h *replicaHost) get(id string) (*replica.Replica, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.replicas[id]
	return r, ok
}

// removeFormerMembers removes the replicas MembersChanged kept while the
// node caught up with the metadata: those of queues whose record, now
// current, does not name this node.
func (h *replicaHost) removeFormerMembers() {
	h.mu.Lock()
	qs := slices.Collect(maps.Values(h.queues))
	h.mu.Unlock()
	for _, q := range qs {
		q.mu.Lock()
		if !slices.Contains(q.members, h.c.self) {
			// A hibernating one wakes to go, as in MembersChanged.
			if local, had := h.wakeLocked(q); had {
				q.removeLocalLocked(local)
			}
		}
		q.mu.Unlock()
	}
}
