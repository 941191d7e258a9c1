package forward

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/proto/queuepb"
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
//
// The Router itself holds what its parts share: the config, the log and
// its lifetime (lifetime.go: the context its calls and goroutines end
// with, their wait group, and whether one may still start). Each part
// owns its own state, with the lock guarding it, and points back to the
// Router for the rest:
//   - leaders (leader.go, members.go): the membership, where the group is
//     led from, and calls run there;
//   - pub (publish.go): numbered publishes, kept until the leader answers;
//   - consumers (consumers.go): the consumers, each following the leader
//     (consume.go) through its Consume stream (attachment.go);
//   - settles (settle.go): settlements by delivery ID;
//   - owned (owned.go): settlements by holder.
type Router struct {
	cfg    RouterConfig
	log    *slog.Logger
	ctx    context.Context // done once the router is closed or deleted
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// The publisher's and the settlers' goroutines start on first use
	// (startOnce): most routers of a node with many queues never publish
	// or settle through it, and an idle goroutine still costs a stack.
	goMu      sync.Mutex
	goStopped bool

	leaders   leaderFinder
	pub       *publisher
	consumers consumerSet
	settles   settlements
	owned     ownedSettler
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
		cfg:    cfg,
		log:    cfg.Log.With("queue", cfg.Name),
		ctx:    ctx,
		cancel: cancel,
	}
	r.leaders.init(r, cfg.Members, cfg.Local, cfg.Leader)
	// From here on they live in leaders only: a member closed and
	// replaced (a hibernating group, cluster/node) must not stay
	// reachable from the config.
	r.cfg.Members, r.cfg.Local = nil, nil
	r.pub = newPublisher(r)
	r.consumers.init(r)
	r.settles.init(r)
	r.owned.init(r)
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

// Get takes one message for basic.get from the leader. Each get, whether
// this node's member leads or another node's does, is checked out to a
// getter ID of its own (owned.go), which this router settles until a
// leader commits it, and releases when the answer is lost. A get asked of
// the member here can be committed and its answer lost as well: the
// member loses its leadership before it applies the get (paused, cut
// off), raft fails the proposal, and the get is asked again of the next
// leader. Checked out to the member's own getter, shared by every channel
// of the node, the first message could be given back by no one until the
// new leader gave up on the old one's consumers (the disconnected timeout).
func (r *Router) Get(noAck bool) (queue.Delivery, uint32, bool, error) {
	ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
	defer cancel()
	r.owned.await(ctx)
	var d queue.Delivery
	var remaining uint32
	var ok bool
	err := r.leaders.onLeader(ctx, func(l Local) error {
		getter := replica.ConsumerIDFor(r.cfg.SelfBoot)
		var err error
		d, remaining, ok, err = l.GetAs(getter, noAck)
		if err != nil {
			// Perhaps committed before the leadership went: whatever
			// the getter holds goes back, through whichever member leads.
			r.owned.release(getter)
			return err
		}
		if ok && d.ID != 0 {
			r.owned.noteGet(d.ID, getter)
			r.settles.noteOrigin(true, "", nil)
		}
		return nil
	}, func(ctx context.Context, c queuepb.ForwardClient, addr string) error {
		getter := replica.ConsumerIDFor(r.cfg.SelfBoot)
		rep, err := c.Get(ctx, &queuepb.GetRequest{QueueId: r.cfg.QueueID, NoAck: noAck, Getter: getter})
		if err != nil {
			// Perhaps committed, its answer lost: whatever the getter
			// holds goes back. (Nothing, if the get never reached the log.)
			r.owned.release(getter)
			return err
		}
		ok, remaining = rep.Ok, rep.Remaining
		if !ok {
			return nil
		}
		if d, err = decodeDelivery(rep.Delivery); err != nil {
			r.owned.release(getter)
			return err
		}
		if d.ID != 0 {
			if rep.Owned {
				r.owned.noteGet(d.ID, getter)
			}
			r.settles.noteOrigin(false, addr, nil)
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
