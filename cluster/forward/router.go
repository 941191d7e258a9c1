package forward

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// RouterConfig is what a Router needs.
type RouterConfig struct {
	QueueID string   // the group's ID (what the Server's lookup takes)
	Name    string   // "vhost/name", for logs
	Members []string // node names of the group's members
	Self    string   // this node's name, told to the leader as consumers' origin
	// SelfBoot names this start of the node (replica.BootOf): the
	// consumers it attaches carry it in their IDs.
	SelfBoot string
	// Local is this node's member, nil when this node is not a member.
	// Members and Local are where the router starts; SetMembers changes
	// them.
	Local Local
	// Addr gives a node's internal (gRPC) address.
	Addr func(node string) (internalAddr string, ok bool)
	Pool *rpc.Pool
	// PublishTimeout: a publish not committed within it gets done(err),
	// the publisher's basic.nack. Default 30 s.
	PublishTimeout time.Duration
	Log            *slog.Logger
	// Wake opens this node's member again when it is closed while the
	// group hibernates (the node's SetMembers then hands it over); Asleep
	// reports whether it is. Nil for a node that never hibernates groups.
	Wake   func()
	Asleep func() bool
	// Gone, when set, reports why the group cannot be reached at all
	// for now: the node of an in-memory queue (the group's one member)
	// has failed or started again without it. Publishes are then nacked
	// at once, as RabbitMQ's channel nacks those to a queue whose node
	// went down, instead of after PublishTimeout (they stay queued, as
	// expired ones do, should the node come back), and gets, consumes,
	// purges and counts fail at once with its error.
	Gone func() error
	// Leader, when set, leads the group for good: the node of another
	// node's in-memory queue. The router starts knowing it, and reports
	// it while it has learnt no other (a call to it failed).
	Leader string
}

const (
	defaultPublishTimeout = 30 * time.Second
	// opTimeout bounds Get, Purge and the first attach of a consumer,
	// leader resolution included.
	opTimeout = 10 * time.Second
	// statsTimeout bounds Stats and Delete's count on a non-member.
	statsTimeout = 2 * time.Second
	// rpcTimeout bounds one Leader or Settle call.
	rpcTimeout = 2 * time.Second
	minBackoff = 10 * time.Millisecond
	maxBackoff = 500 * time.Millisecond
)

// errNoLeader: no member names a leader yet.
var errNoLeader = errors.New("forward: no leader known")

// ErrPublishTimeout is a forwarded publish's done error when the leader
// did not commit it within RouterConfig.PublishTimeout.
var ErrPublishTimeout = errors.New("forward: publish not confirmed in time")

// Router is the queue.Queue the broker hands AMQP channels for a
// replicated queue on every node, member or not: each call goes to the
// group's leader, straight to Local when it leads, else over gRPC to the
// leader node's Server.
type Router struct {
	cfg    RouterConfig
	log    *slog.Logger
	ctx    context.Context // done once the router is closed or deleted
	cancel context.CancelFunc
	pub    *publisher
	wg     sync.WaitGroup

	// The publisher's and the settler's goroutines start on first use
	// (go.go): most routers of a node with many queues never publish or
	// settle through it, and an idle goroutine still costs a stack.
	goMu       sync.Mutex
	goStopped  bool
	pubStarted atomic.Bool
	setStarted atomic.Bool

	// leaders finds the group's leader and runs calls there (leader.go).
	leaders leaderFinder

	mu        sync.Mutex
	closed    bool
	consumers map[queue.Consumer]*consumer
	// cancelled holds the IDs of consumers cancelled while their channel
	// stays open, until the channel closes and releases them (Release).
	cancelled cancelledSet

	// source is where the latest delivery came from: the leader, as far
	// as this node can tell without asking. Settlements go there; a
	// delivery's ID means the same to every member (the machine numbers
	// its handings-out), so the leader settles what its predecessors
	// handed out, and a member that no longer leads passes them on
	// (replica/former.go). Replaced, never changed, so read without a lock.
	source atomic.Pointer[origin]

	settleMu   sync.Mutex
	unary      map[string][]*queuepb.Settlement // by node address, for the settler
	settleWake chan struct{}

	// owned carries settlements by holder: of forwarded gets, and the
	// release of closed channels' consumers (owned.go).
	owned ownedSettler
}

// origin is where deliveries came from.
type origin struct {
	local bool
	addr  string
	// stream is a live consume stream to that member, which carries
	// settlements; nil sends them with the unary Settle.
	stream atomic.Pointer[attachment]
}

var (
	_ queue.Queue    = (*Router)(nil)
	_ queue.Releaser = (*Router)(nil)
)

// NewRouter starts a router.
func NewRouter(cfg RouterConfig) *Router {
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = defaultPublishTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Router{
		cfg:        cfg,
		log:        cfg.Log.With("queue", cfg.Name),
		ctx:        ctx,
		cancel:     cancel,
		consumers:  make(map[queue.Consumer]*consumer),
		cancelled:  newCancelledSet(),
		unary:      make(map[string][]*queuepb.Settlement),
		settleWake: make(chan struct{}, 1),
	}
	r.owned.init()
	r.leaders.r = r
	r.SetMembers(cfg.Members, cfg.Local)
	r.leaders.leader = cfg.Leader
	// From here on they live in leaders only: a member
	// closed and replaced (a hibernating group, cluster/node) must not
	// stay reachable from the config.
	r.cfg.Members, r.cfg.Local = nil, nil
	r.pub = newPublisher(r)
	return r
}

func randomID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// AwaitLeader resolves the group's leader, waking the group if it
// hibernates, and returns once one is known or ctx ends.
func (r *Router) AwaitLeader(ctx context.Context) error {
	_, err := r.leaders.resolve(ctx)
	return err
}

// sleep waits d, or returns why it cannot.
func (r *Router) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.ctx.Done():
		return queue.ErrDeleted
	}
}

// Enqueue stores m through the leader; done is called once the leader has
// committed it, with queue.ErrRejected when the queue refused it, or with
// an error when it did not commit within the publish timeout. Enqueue
// blocks while the router has too many unconfirmed publishes, until ctx
// is done.
func (r *Router) Enqueue(ctx context.Context, m *queue.Message, done func(error)) error {
	if done == nil {
		done = func(error) {}
	}
	return r.pub.enqueue(ctx, m, done)
}

// Get takes one message for basic.get from the leader. A get forwarded to
// another node's leader is checked out to a getter ID of its own (owned.go),
// which this router settles until a leader commits it, and releases when
// the answer is lost.
func (r *Router) Get(noAck bool) (queue.Delivery, uint32, bool, error) {
	ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
	defer cancel()
	r.awaitOwned(ctx)
	var d queue.Delivery
	var remaining uint32
	var ok bool
	err := r.leaders.onLeader(ctx, func(l Local) error {
		var err error
		d, remaining, ok, err = l.Get(noAck)
		if err == nil && ok && d.ID != 0 {
			r.noteOrigin(true, "", nil)
		}
		return err
	}, func(ctx context.Context, c queuepb.ForwardClient, addr string) error {
		getter := replica.ConsumerIDFor(r.cfg.SelfBoot)
		rep, err := c.Get(ctx, &queuepb.GetRequest{QueueId: r.cfg.QueueID, NoAck: noAck, Getter: getter})
		if err != nil {
			// Perhaps committed, its answer lost: whatever the getter
			// holds goes back. (Nothing, if the get never reached the log.)
			r.releaseOwner(getter)
			return err
		}
		ok, remaining = rep.Ok, rep.Remaining
		if !ok {
			return nil
		}
		if d, err = decodeDelivery(rep.Delivery); err != nil {
			r.releaseOwner(getter)
			return err
		}
		if d.ID != 0 {
			if rep.Owned {
				r.noteGet(d.ID, getter)
			}
			r.noteOrigin(false, addr, nil)
		}
		return nil
	})
	if err != nil {
		return queue.Delivery{}, 0, false, err
	}
	return d, remaining, ok, nil
}

// Purge removes the ready messages at the leader.
func (r *Router) Purge() (uint32, error) {
	ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
	defer cancel()
	var n uint32
	err := r.leaders.onLeader(ctx, func(l Local) error {
		var err error
		n, err = l.Purge()
		return err
	}, func(ctx context.Context, c queuepb.ForwardClient, _ string) error {
		rep, err := c.Purge(ctx, &queuepb.PurgeRequest{QueueId: r.cfg.QueueID})
		if err == nil {
			n = rep.Count
		}
		return err
	})
	return n, err
}

// Stats is the leader's count. A follower's own count can trail it: raft
// tells followers the commit index only with the next entries, so an idle
// follower may not have applied the last ones. A member falls back on its
// own count when the leader cannot be reached in time; a non-member
// reports zero then.
func (r *Router) Stats() queue.Stats {
	if l := r.leaders.member(); l != nil && l.IsLeader() {
		return l.Stats()
	}
	if r.leaders.asleep() {
		return queue.Stats{} // hibernated: empty and unused, and left asleep
	}
	st, err := r.remoteStats()
	if err != nil {
		r.log.Debug("forward: stats unavailable", "err", err)
		if l := r.leaders.member(); l != nil {
			return l.Stats()
		}
	}
	return st
}

func (r *Router) remoteStats() (queue.Stats, error) {
	ctx, cancel := context.WithTimeout(r.ctx, statsTimeout)
	defer cancel()
	var st queue.Stats
	err := r.leaders.onLeader(ctx, func(l Local) error {
		st = l.Stats()
		return nil
	}, func(ctx context.Context, c queuepb.ForwardClient, _ string) error {
		rep, err := c.Stats(ctx, &queuepb.StatsRequest{QueueId: r.cfg.QueueID})
		if err == nil {
			st = queue.Stats{Ready: rep.Ready, Unacked: rep.Unacked, Consumers: rep.Consumers, DeadLettered: rep.DeadLettered, Delayed: rep.Delayed}
		}
		return err
	})
	return st, err
}

// Delete stops the router's streams, tells its consumers Gone, and deletes
// this node's member when there is one. It returns the member's message
// count, or the leader's as last seen for a non-member.
func (r *Router) Delete(ifUnused, ifEmpty bool) (uint32, error) {
	var n uint32
	if l := r.leaders.member(); l != nil {
		var err error
		if n, err = l.Delete(ifUnused, ifEmpty); err != nil && !errors.Is(err, queue.ErrDeleted) {
			return 0, err
		}
	} else {
		st, _ := r.remoteStats()
		if ifUnused && st.Consumers > 0 {
			return 0, queue.ErrInUse
		}
		if ifEmpty && st.Ready > 0 {
			return 0, queue.ErrNotEmpty
		}
		n = st.Ready
	}
	for _, w := range r.stop() {
		w.end(func(c queue.Consumer) { c.Gone() })
	}
	r.wg.Wait()
	return n, nil
}

// Close stops the router and this node's member without deleting the
// queue; consumers are not told.
func (r *Router) Close() {
	for _, w := range r.stop() {
		w.end(nil)
	}
	r.wg.Wait()
	if l := r.leaders.member(); l != nil {
		l.Close()
	}
}

// stop ends every stream and returns the consumers.
func (r *Router) stop() []*consumer {
	r.mu.Lock()
	r.closed = true
	ws := make([]*consumer, 0, len(r.consumers))
	for _, w := range r.consumers {
		ws = append(ws, w)
	}
	clear(r.consumers)
	r.mu.Unlock()
	r.goMu.Lock()
	r.goStopped = true // no goroutine starts after this: wg.Wait follows
	r.goMu.Unlock()
	r.cancel()
	r.pub.close(queue.ErrDeleted)
	return ws
}

// noteOrigin records where a delivery came from; a is the remote stream
// that carried it, if any. It is called per delivery, so the usual case
// (the same source) takes no lock and allocates nothing.
func (r *Router) noteOrigin(local bool, addr string, a *attachment) {
	if o := r.source.Load(); o != nil && o.local == local && o.addr == addr {
		if a != nil && o.stream.Load() != a {
			o.stream.Store(a)
		}
		return
	}
	o := &origin{local: local, addr: addr}
	if a != nil {
		o.stream.Store(a)
	}
	r.source.Store(o)
}

// attachmentEnded stops settlements going through a's stream.
func (r *Router) attachmentEnded(a *attachment) {
	if o := r.source.Load(); o != nil {
		o.stream.CompareAndSwap(a, nil)
	}
}

// Settle acknowledges deliveries at the leader, as far as this node knows
// it (where the latest delivery came from).
func (r *Router) Settle(ids []uint64) { r.settle(queuepb.SettleOp_SETTLE, 0, ids) }

// Requeue returns deliveries to the queue.
func (r *Router) Requeue(ids []uint64, cause queue.ReturnCause) {
	r.settle(queuepb.SettleOp_REQUEUE, cause, ids)
}

// Discard drops (dead-letters) deliveries.
func (r *Router) Discard(ids []uint64, cause queue.ReturnCause) {
	r.settle(queuepb.SettleOp_DISCARD, cause, ids)
}

func (r *Router) settle(op queuepb.SettleOp, cause queue.ReturnCause, ids []uint64) {
	ids = r.settleGets(opOf(op), cause, ids)
	o := r.source.Load()
	if o == nil || len(ids) == 0 {
		return // nothing was delivered through this node
	}
	if o.local {
		if l := r.leaders.member(); l != nil {
			settleOn(l, &queuepb.Settlement{Op: op, Cause: uint32(cause), Ids: ids})
		}
		return
	}
	ids = append([]uint64(nil), ids...)
	if a := o.stream.Load(); a != nil && a.settle(op, cause, ids) {
		return
	}
	r.settleUnary(o.addr, []*queuepb.Settlement{{Op: op, Cause: uint32(cause), Ids: ids}})
}

// SettleHeld passes settlements that this node's member named by consumer
// and message, as a former leader (replica/former.go), to the leader. It
// returns at once; they are sent until a leader takes them
// (atLeaderLater).
func (r *Router) SettleHeld(list []replica.HeldSettlement) {
	if len(list) == 0 {
		return
	}
	r.atLeaderLater(func(l Local) error {
		return l.SettleHeld(list)
	}, func(ctx context.Context, c queuepb.ForwardClient, _ string) error {
		_, err := c.Settle(ctx, &queuepb.SettleRequest{QueueId: r.cfg.QueueID, Held: encodeHeld(list)})
		return err
	}, func(err error) {
		r.log.Debug("forward: a former leader's settlements dropped", "err", err)
	})
}

// SettleDeliveriesAtLeader passes settlements, by delivery ID, that this
// node's member could not resolve (it has not applied the entries that
// handed them out) on to the leader. It returns at once; they are sent
// until a leader takes them (atLeaderLater).
func (r *Router) SettleDeliveriesAtLeader(op raftq.Op, cause queue.ReturnCause, deliveries []uint64) {
	if len(deliveries) == 0 {
		return
	}
	list := []*queuepb.Settlement{{Op: opWire(op), Cause: uint32(cause), Ids: append([]uint64(nil), deliveries...)}}
	r.settleAtLeader("", list, nil)
}

// atLeaderLater runs onLeader on a goroutine of the router's wait group,
// again and again (each try for up to opTimeout) until it succeeds, and
// failed with its error once it cannot any more: the queue is gone or the
// router is closing. Nothing once the router is stopping. Settlements are
// idempotent (a message its holder no longer holds is left alone), so a
// late one is harmless, while a dropped one leaves a message checked out
// to a consumer that believes it settled it, using up its prefetch.
func (r *Router) atLeaderLater(local func(Local) error, remote func(context.Context, queuepb.ForwardClient, string) error, failed func(error)) {
	r.goMu.Lock()
	defer r.goMu.Unlock()
	if r.goStopped {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		retry := settleRetryMin
		for {
			ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
			err := r.leaders.onLeader(ctx, local, remote)
			cancel()
			if err == nil {
				return
			}
			if errors.Is(err, queue.ErrDeleted) || r.sleep(r.ctx, retry) != nil {
				failed(err)
				return
			}
			r.log.Debug("forward: settlements not taken yet; sending them again", "err", err)
			retry = min(2*retry, settleRetryMax)
		}
	}()
}

// settleUnary hands settlements to the settler goroutine.
func (r *Router) settleUnary(addr string, list []*queuepb.Settlement) {
	if len(list) == 0 {
		return
	}
	r.settleMu.Lock()
	for _, s := range list {
		r.unary[addr] = appendSettlement(r.unary[addr], s.Op, queue.ReturnCause(s.Cause), s.Ids)
	}
	r.settleMu.Unlock()
	r.startOnce(&r.setStarted, r.settler)
	select {
	case r.settleWake <- struct{}{}:
	default:
	}
}

// appendSettlement adds ids to list, merging with its last settlement
// when op and cause match.
func appendSettlement(list []*queuepb.Settlement, op queuepb.SettleOp, cause queue.ReturnCause, ids []uint64) []*queuepb.Settlement {
	if n := len(list); n > 0 && list[n-1].Op == op && list[n-1].Cause == uint32(cause) {
		list[n-1].Ids = append(list[n-1].Ids, ids...)
		return list
	}
	return append(list, &queuepb.Settlement{Op: op, Cause: uint32(cause), Ids: ids})
}

// settler sends settlements that no live consume stream carries, one
// unary call per node per batch.
func (r *Router) settler() {
	defer r.wg.Done()
	for {
		select {
		case <-r.settleWake:
		case <-r.ctx.Done():
			return
		}
		r.settleMu.Lock()
		batch := r.unary
		r.unary = make(map[string][]*queuepb.Settlement)
		r.settleMu.Unlock()
		for addr, list := range batch {
			c, err := r.leaders.client(addr)
			if err == nil {
				ctx, cancel := context.WithTimeout(r.ctx, rpcTimeout)
				_, err = c.Settle(ctx, &queuepb.SettleRequest{QueueId: r.cfg.QueueID, Settlements: list})
				cancel()
			}
			if err != nil {
				r.settleAtLeader(addr, list, err)
			}
		}
	}
}

// settleAtLeader sends settlements that addr did not take (its node is
// gone, say) to the leader, which knows every delivery's ID. It returns at
// once; they are sent until a leader takes them (atLeaderLater).
func (r *Router) settleAtLeader(addr string, list []*queuepb.Settlement, cause error) {
	r.atLeaderLater(func(l Local) error {
		for _, s := range list {
			settleOn(l, s)
		}
		return nil
	}, func(ctx context.Context, c queuepb.ForwardClient, _ string) error {
		_, err := c.Settle(ctx, &queuepb.SettleRequest{QueueId: r.cfg.QueueID, Settlements: list})
		return err
	}, func(err error) {
		r.log.Debug("forward: settlements dropped", "addr", addr, "cause", cause, "err", err)
	})
}

// startOnce runs fn on a goroutine of the router's wait group the first
// time it is called with started, unless the router is stopping.
func (r *Router) startOnce(started *atomic.Bool, fn func()) {
	if started.Load() {
		return
	}
	r.goMu.Lock()
	defer r.goMu.Unlock()
	if r.goStopped || started.Load() {
		return
	}
	started.Store(true)
	r.wg.Add(1)
	go fn()
}

// Leader is the group's leader as this node knows it without asking
// anyone: its member's view, or the leader a non-member last learned ("" if
// none yet).
func (r *Router) Leader() string { return r.leaders.known() }

// Reconfigure gives the group's leader the queue's new effective
// x-arguments (a policy changed): this node's member when it leads, else
// the leader's node over gRPC. ErrReconfigureUnsupported when the leading
// member cannot change its configuration while running.
func (r *Router) Reconfigure(args wire.Table) error {
	data, err := wire.AppendTable(nil, args)
	if err != nil {
		return fmt.Errorf("forward: encode arguments: %w", err)
	}
	ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
	defer cancel()
	return r.leaders.onLeader(ctx, func(l Local) error {
		return l.Reconfigure(args)
	}, func(ctx context.Context, c queuepb.ForwardClient, _ string) error {
		_, err := c.Reconfigure(ctx, &queuepb.ReconfigureRequest{QueueId: r.cfg.QueueID, Arguments: data})
		if status.Code(err) == codes.Unimplemented {
			return ErrReconfigureUnsupported
		}
		return err
	})
}
