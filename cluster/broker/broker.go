// Package broker is the node's AMQP model: users and their permissions,
// vhosts with their exchanges, bindings and queues, routing, and the rules
// of declaring and deleting them. The AMQP connection layer (amqp/server)
// drives it; queues themselves sit behind the queue.Queue boundary.
//
// Errors returned to the protocol layer are *amqp.Error values carrying
// RabbitMQ's reply codes and texts.
package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/alarm"
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

// catchUp brings a cluster member's model up to every change committed
// anywhere before the call, for a client naming an entity this node does
// not have yet: declared through another node a moment ago, it is
// committed but maybe not applied here. It reports whether it caught up
// (false on a standalone node, where the model is always current).
//
// Many channels may miss at once (publishes, passive declares): a caller
// is answered by any catch-up that started after it arrived, so at most
// one runs at a time and each caller waits for at most two.
func (b *Broker) catchUp() bool {
	ticket := b.catchUps.arrived.Add(1)
	b.catchUps.mu.Lock()
	defer b.catchUps.mu.Unlock()
	if b.catchUps.covered >= ticket {
		return b.catchUps.ok
	}
	// Every caller with a ticket up to here arrived before this one starts.
	covers := b.catchUps.arrived.Load()
	ok := b.catchUpOnce()
	b.catchUps.covered, b.catchUps.ok = covers, ok
	return ok
}

const catchUpTimeout = 10 * time.Second

// catchUpOnce is one catch-up with the metadata leader.
func (b *Broker) catchUpOnce() bool {
	w, ok := b.store.(Watchable)
	if !ok {
		return false
	}
	// Generous: this node applies the metadata log in order, opening the
	// replica of each queue it is a member of, so a burst of declares
	// through another node can keep it busy for seconds.
	ctx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
	defer cancel()
	if err := w.CatchUp(ctx); err != nil {
		b.log.Debug("metadata catch-up", "err", err)
		return false
	}
	return true
}

// lookAgainAfterMiss is for a lookup that missed: it reports whether the
// caller should look again. If this node's model may be behind, it
// catches up first (false if that fails). If not, the missing change may
// still have reached the model between the lookup and the check (the
// check sees an entry handed to the model meanwhile as nothing missing),
// so a second look is worth its cost, which only a miss pays.
func (b *Broker) lookAgainAfterMiss() bool { return !b.mayBeStale() || b.catchUp() }

// mayBeStale reports whether a miss in the model (no such exchange, no
// queue routed to) may be a change committed through another node that
// this one has not applied yet.
func (b *Broker) mayBeStale() bool {
	w, ok := b.store.(Watchable)
	return ok && w.MayBeStale()
}

// replaying reports whether the model may still be replaying the
// metadata after a start (Watchable.CaughtUp): what it holds may have
// been replaced long ago.
func (b *Broker) replaying() bool {
	w, ok := b.store.(Watchable)
	return ok && !w.CaughtUp()
}

// catchUps coordinates catchUp's callers.
type catchUps struct {
	arrived atomic.Uint64 // tickets handed out
	mu      sync.Mutex    // held while a catch-up runs
	covered uint64        // tickets the last catch-up answered
	ok      bool          // its outcome
}

// Seed is the initial set of users, vhosts and permissions.
type Seed struct {
	Users       []SeedUser
	Vhosts      []string
	Permissions []catalog.Permission
}

// SeedUser is a user given in the config file. Either Password (plain) or
// PasswordHash (RabbitMQ's sha256 layout) is set.
type SeedUser struct {
	Name         string
	Password     string
	PasswordHash string
	Tags         []string
}

// DefaultSeed is what RabbitMQ creates on a fresh node: vhost "/" and
// guest/guest with full access to it.
func DefaultSeed() Seed {
	return Seed{
		Users:       []SeedUser{{Name: "guest", Password: "guest", Tags: []string{"administrator"}}},
		Vhosts:      []string{"/"},
		Permissions: []catalog.Permission{{User: "guest", Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"}},
	}
}

// Broker is the node's model of users, vhosts and their contents.
type Broker struct {
	log   *slog.Logger
	store catalog.Store
	cfg   Config
	// catchUps shares metadata catch-ups among the callers that miss.
	catchUps catchUps

	// alarms are the resource alarms in effect across the cluster.
	alarms *alarm.Set
	// memory counts the node's memory, message bytes held by in-memory
	// queues at once, and raises the memory alarm.
	memory *queue.Budget
	// ready is closed once the model is restored, for updates from the
	// cluster that arrive meanwhile; nil on a standalone node.
	ready chan struct{}
	// ctx is done once the broker closes: it stops the policy
	// reconciler, which closes reconciled, and the removal of transient
	// queues (remote.go).
	ctx        context.Context
	stop       context.CancelFunc
	reconciled chan struct{}

	mu     sync.RWMutex
	users  map[string]catalog.User
	perms  map[permKey]*permission
	vhosts map[string]*Vhost

	// nodes are the drained nodes' records (nodes.go).
	nodes nodeTable
	// served are this node's in-memory queues other nodes reach
	// (remote.go).
	served servedQueues
	// stopping is set once the node shuts down (Stopping).
	stopping atomic.Bool
	// revoke closes the connections of a deleted user or vhost
	// (access.go).
	revoke func(Revocation)
}

// DefaultNodeID is the node ID of a node that names none: a standalone
// node's, the one its queues' groups know it by.
const DefaultNodeID = "warren@localhost"

type permKey struct{ user, vhost string }

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
	b := &Broker{
		log:    log,
		store:  store,
		cfg:    cfg,
		users:  make(map[string]catalog.User),
		perms:  make(map[permKey]*permission),
		vhosts: make(map[string]*Vhost),

		reconciled: make(chan struct{}),
	}
	b.ctx, b.stop = context.WithCancel(context.Background())
	b.alarms = alarm.NewSet(cfg.NodeID, log.With("component", "alarm"))
	b.memory = queue.NewBudget(cfg.MemoryLimit, b.alarms.Flip(alarm.Memory))
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

func (b *Broker) seed(s Seed) (*catalog.Snapshot, error) {
	changes, err := b.seedChanges(s)
	if err != nil {
		return nil, err
	}
	if err := b.store.Apply(changes...); err != nil {
		return nil, fmt.Errorf("seed metadata: %w", err)
	}
	b.log.Info("seeded metadata on first start", "users", len(s.Users), "vhosts", len(s.Vhosts))
	return b.store.Load()
}

func (b *Broker) seedChanges(s Seed) ([]catalog.Change, error) {
	var changes []catalog.Change
	for _, u := range s.Users {
		hash := u.PasswordHash
		if hash == "" && u.Password != "" {
			hash = HashPassword(u.Password)
		}
		changes = append(changes, catalog.Put(catalog.User{Name: u.Name, PasswordHash: hash, Tags: u.Tags}))
	}
	for _, v := range s.Vhosts {
		changes = append(changes, catalog.Put(catalog.Vhost{Name: v, DefaultQueueType: b.cfg.DefaultQueueType}))
	}
	for _, p := range s.Permissions {
		if _, err := compilePermission(p); err != nil {
			return nil, fmt.Errorf("seed permissions: %w", err)
		}
		changes = append(changes, catalog.Put(p))
	}
	return changes, nil
}

// SeedIfEmpty seeds a new cluster's metadata from the configuration (the
// users, vhosts and permissions of Config.Seed). The node calls it on the
// metadata leader once the cluster has formed; after that the replicated
// store is the truth and the configuration's seed is not read again. Two
// nodes seeding at once cannot both succeed: the first record is created
// only if absent.
func (b *Broker) SeedIfEmpty() error {
	b.mu.RLock()
	empty := len(b.vhosts) == 0 && len(b.users) == 0
	b.mu.RUnlock()
	if !empty {
		return nil
	}
	changes, err := b.seedChanges(b.cfg.Seed)
	if err != nil || len(changes) == 0 {
		return err
	}
	changes[0].IfAbsent = true
	if err := b.store.Apply(changes...); err != nil {
		if errors.Is(err, catalog.ErrExists) {
			return nil
		}
		return fmt.Errorf("seed metadata: %w", err)
	}
	b.applyChanges(changes)
	b.log.Info("seeded the cluster's metadata", "users", len(b.cfg.Seed.Users), "vhosts", len(b.cfg.Seed.Vhosts))
	return nil
}

func compilePermission(p catalog.Permission) (*permission, error) {
	c, err := compilePattern(p.Configure)
	if err != nil {
		return nil, err
	}
	w, err := compilePattern(p.Write)
	if err != nil {
		return nil, err
	}
	r, err := compilePattern(p.Read)
	if err != nil {
		return nil, err
	}
	return &permission{rec: p, configure: c, write: w, read: r}, nil
}

func (b *Broker) restore(snap *catalog.Snapshot) error {
	b.resetNodes(snap.Nodes) // nodes.go
	for _, u := range snap.Users {
		b.users[u.Name] = u
	}
	for _, p := range snap.Permissions {
		cp, err := compilePermission(p)
		if err != nil {
			return fmt.Errorf("load permission of %s on %s: %w", p.User, p.Vhost, err)
		}
		b.perms[permKey{p.User, p.Vhost}] = cp
	}
	for _, v := range snap.Vhosts {
		b.vhosts[v.Name] = newVhost(b, v)
	}
	// Policies before what they apply to.
	for _, p := range snap.Policies {
		v := b.vhosts[p.Vhost]
		if v == nil {
			return fmt.Errorf("policy %q refers to missing vhost %q", p.Name, p.Vhost)
		}
		v.applyPolicy(p, false)
	}
	for _, x := range snap.Exchanges {
		v := b.vhosts[x.Vhost]
		if v == nil {
			return fmt.Errorf("exchange %q refers to missing vhost %q", x.Name, x.Vhost)
		}
		if err := v.restoreExchange(x); err != nil {
			return err
		}
	}
	for _, q := range snap.Queues {
		v := b.vhosts[q.Vhost]
		if v == nil {
			return fmt.Errorf("queue %q refers to missing vhost %q", q.Name, q.Vhost)
		}
		if err := v.restoreQueue(q); err != nil {
			return err
		}
	}
	for _, bd := range snap.Bindings {
		v := b.vhosts[bd.Vhost]
		if v == nil {
			return fmt.Errorf("binding refers to missing vhost %q", bd.Vhost)
		}
		if err := v.restoreBinding(bd); err != nil {
			b.log.Warn("dropping stored binding", "vhost", bd.Vhost, "source", bd.Source, "destination", bd.Destination, "err", err)
		}
	}
	return nil
}

// User is an authenticated user as the connection layer sees it.
type User struct {
	Name string
	Tags []string
}

// loginRefused is RabbitMQ's text for every failed login: the reason is
// logged, never told to the client.
func loginRefused(mechanism string) *wire.Error {
	return wire.Errorf(wire.AccessRefused, "Login was refused using authentication mechanism %s. For details see the broker logfile.", mechanism)
}

// Authenticate checks a username and password presented with mechanism
// from addr.
//
// A cluster member that may be behind (restarted a moment ago) catches up
// before refusing: the user, or its new password, may have been committed
// through another node, and a client told ACCESS_REFUSED gives up rather
// than retry.
func (b *Broker) Authenticate(mechanism, username, password string, addr net.Addr) (*User, error) {
	u, ok := b.user(username)
	valid := ok && u.PasswordHash != "" && CheckPassword(u.PasswordHash, password)
	if !valid && b.lookAgainAfterMiss() {
		u, ok = b.user(username)
		valid = ok && u.PasswordHash != "" && CheckPassword(u.PasswordHash, password)
	}
	if !valid {
		b.log.Warn("login refused: invalid credentials", "user", username, "mechanism", mechanism, "remote", addrString(addr))
		return nil, loginRefused(mechanism)
	}
	if slices.Contains(b.cfg.LoopbackUsers, username) && !isLoopback(addr) {
		b.log.Warn("login refused: user can only connect via localhost", "user", username, "remote", addrString(addr))
		return nil, loginRefused(mechanism)
	}
	return &User{Name: u.Name, Tags: u.Tags}, nil
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

func isLoopback(a net.Addr) bool {
	switch t := a.(type) {
	case *net.TCPAddr:
		return t.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	case nil:
		return false
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (b *Broker) user(name string) (catalog.User, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	u, ok := b.users[name]
	return u, ok
}

// OpenVhost returns the vhost a user may use (connection.open). The
// refusal is connection-level NOT_ALLOWED, as in RabbitMQ; a node that may
// be behind catches up first, as Authenticate does.
func (b *Broker) OpenVhost(u *User, name string) (*Vhost, error) {
	v, ok, allowed := b.vhostFor(u, name)
	if (!ok || !allowed) && b.lookAgainAfterMiss() {
		v, ok, allowed = b.vhostFor(u, name)
	}
	if !ok || !allowed {
		b.log.Warn("vhost access refused", "user", u.Name, "vhost", name, "exists", ok)
		return nil, wire.Errorf(wire.NotAllowed, "access to vhost '%s' refused for user '%s'", name, u.Name)
	}
	return v, nil
}

func (b *Broker) vhostFor(u *User, name string) (v *Vhost, ok, allowed bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	v, ok = b.vhosts[name]
	_, allowed = b.perms[permKey{u.Name, name}]
	return v, ok, allowed
}

// check returns nil when u may perform a on the named resource of vhost.
func (b *Broker) check(u *User, vhost string, a Access, kind, name string) error {
	b.mu.RLock()
	p := b.perms[permKey{u.Name, vhost}]
	b.mu.RUnlock()
	if p.allows(a, name) {
		return nil
	}
	return wire.Errorf(wire.AccessRefused, "%s access to %s '%s' in vhost '%s' refused for user '%s'", a, kind, name, vhost, u.Name)
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

func (b *Broker) stopReconcile() {
	b.stop()
	<-b.reconciled
}

// Alarms is the node's view of the resource alarms in effect across the
// cluster (this node's memory alarm among them; the node adds its disk
// monitor and the other nodes' alarms).
func (b *Broker) Alarms() *alarm.Set { return b.alarms }

// Blocking is "" and nil while publishers may go on; otherwise the reason
// connection.blocked gives and a channel closed when the alarms change
// (alarm.Set.Blocking). Publishing connections wait on it.
func (b *Broker) Blocking() (reason string, changed <-chan struct{}) { return b.alarms.Blocking() }

// NodeID is this node's name (a standalone node's is DefaultNodeID).
func (b *Broker) NodeID() string { return b.cfg.NodeID }

// MemoryAlarm reports whether this node's memory alarm is on.
func (b *Broker) MemoryAlarm() bool { return b.memory.On() }

// MemoryUsed is the memory the node uses, as its memory alarm counts it.
func (b *Broker) MemoryUsed() int64 { return b.memory.Used() }

// MemoryHeld is the message bytes held by in-memory (classic) queues.
func (b *Broker) MemoryHeld() int64 { return b.memory.Held() }

// MemoryGauge is what the node's memory monitor feeds
// (alarm.StartMemoryMonitor).
func (b *Broker) MemoryGauge() alarm.MemoryGauge { return b.memory }

// MemoryLimit is the memory high watermark (Config.MemoryLimit, or what
// SetMemoryLimit set since); zero if none.
func (b *Broker) MemoryLimit() int64 { return b.memory.Limit() }

// SetMemoryLimit changes the memory high watermark until the node stops,
// as rabbitmqctl set_vm_memory_high_watermark; zero or less is none. The
// alarm follows at once.
func (b *Broker) SetMemoryLimit(limit int64) {
	b.memory.SetLimit(limit)
	b.log.Info("memory high watermark set", "limit_bytes", limit, "used_bytes", b.memory.Used(), "held_bytes", b.memory.Held())
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

// HasVhosts reports whether the model holds any vhost: a cluster member
// that has not yet received the metadata has none.
func (b *Broker) HasVhosts() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.vhosts) > 0
}

// QueueSummary is one queue as operators see it.
type QueueSummary struct {
	Record    catalog.Queue
	Exclusive bool
	Engine    queue.Queue
}

// Queues lists the queues of vhost ("" for every vhost), sorted by vhost
// and name.
func (b *Broker) Queues(vhost string) []QueueSummary {
	var out []QueueSummary
	for _, v := range b.selectVhosts(vhost) {
		v.mu.RLock()
		for _, q := range v.queues {
			rec := q.rec
			rec.Vhost = v.name
			out = append(out, QueueSummary{Record: rec, Exclusive: q.owner != 0, Engine: q.engine})
		}
		v.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b QueueSummary) int {
		if c := strings.Compare(a.Record.Vhost, b.Record.Vhost); c != 0 {
			return c
		}
		return strings.Compare(a.Record.Name, b.Record.Name)
	})
	return out
}

// QueueRecord is the record of queue name in vhost. Not found on a node
// that may be behind, it catches up and looks again (an operator's command
// right after this node restarted must not find the queue missing).
func (b *Broker) QueueRecord(vhost, name string) (catalog.Queue, bool) {
	rec, ok := b.queueRecord(vhost, name)
	if !ok && b.lookAgainAfterMiss() {
		rec, ok = b.queueRecord(vhost, name)
	}
	return rec, ok
}

func (b *Broker) queueRecord(vhost, name string) (catalog.Queue, bool) {
	v := b.vhost(vhost)
	if v == nil {
		return catalog.Queue{}, false
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	q, ok := v.queues[name]
	if !ok {
		return catalog.Queue{}, false
	}
	return q.rec, true
}

// selectVhosts is the vhost named vhost, or every vhost for "".
func (b *Broker) selectVhosts(vhost string) []*Vhost {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var vhosts []*Vhost
	for name, v := range b.vhosts {
		if vhost == "" || vhost == name {
			vhosts = append(vhosts, v)
		}
	}
	return vhosts
}
