package replica

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// inflightLimit bounds a replica's proposed but uncommitted enqueues:
// beyond it Enqueue blocks, and with it the publisher's socket.
const inflightLimit = 4096

// defaultCredit stands in for "unlimited" prefetch (0) and for no-ack
// consumers: the machine needs a bound on what it hands one consumer, and
// the connection's outbound buffer needs one too.
const defaultCredit = 2000

// Replica is this node's member of one quorum queue's Raft group and the
// queue.Queue the broker uses for it.
type Replica struct {
	name string
	dir  string
	log  *slog.Logger
	cfg  Config
	raft *raft.Raft
	// leaderOf is raft, published for the FSM goroutine, which starts
	// applying (replaying the log) before NewRaft returns.
	leaderOf atomic.Pointer[raft.Raft]
	fsm      *fsm
	snapping atomic.Bool // a snapshot snapshotWhenDue started runs
	// checkpoints counts the Checkpoint calls under way.
	checkpoints atomic.Int32
	store       raftStore
	// closeStore closes store's write-ahead log if it is the queue's
	// own; the node's stays open.
	closeStore func() error
	snaps      *bodyStore
	// dlxOnReject: x-overflow=reject-publish-dlx, a classic queue option
	// (guarded by fsm.mu: the FSM reads it, Reconfigure changes it).
	dlxOnReject bool
	recent      recentMessages
	trans       *raft.InmemTransport

	// publisher and seq number this replica's proposals for the machine's
	// confirm and deduplication bookkeeping; pubMu keeps seq order equal
	// to log order, so it is held across raft.Apply, which blocks while
	// raft's apply channel is full.
	publisher uint64
	pubMu     sync.Mutex
	seq       uint64
	slots     chan struct{}
	// pending holds the done callbacks of proposed enqueues, this
	// replica's own and forwarded ones, by publisher and seq; the
	// machine's Confirm and Reject effects complete them. Under pendMu,
	// not pubMu: the FSM goroutine completes them, and raft's leader loop
	// drains the apply channel only while the FSM takes what it commits,
	// so an FSM waiting for pubMu would deadlock with an enqueue blocked
	// in raft.Apply.
	pendMu  sync.Mutex
	pending map[pendingKey]func(error)
	// linger holds publishes for company (linger.go), under pubMu.
	linger heldPublishes
	// tail keeps commit latencies for a hold by PublishLingerShare.
	tail commitTail
	// pendingEpoch counts failPending's answers of pending (raised under
	// pendMu): the held publishes of an earlier epoch are dropped, and
	// seqEpoch (under pubMu) is the epoch publisher's numbering began in.
	pendingEpoch atomic.Uint64
	seqEpoch     uint64

	idBase  uint64
	nextID  atomic.Uint64
	getter  raftq.ConsumerID
	stopped atomic.Bool
	// foreignGets counts the forwarded gets (GetAs with another node's
	// getter) proposed and not yet answered (owned.go's releasesPending).
	foreignGets atomic.Int32
	// stopErr is why it stopped: queue.ErrDeleted once deleted, else
	// ErrNotLeader (closed with its node, or while its group hibernates),
	// which tells a forwarder to send the publish again to whichever
	// member leads. Set before stopped.
	stopErr atomic.Pointer[error]
	// leaderApplied is set while this member leads and has applied
	// every entry committed before its election (watch.go's barrier).
	leaderApplied atomic.Bool
	// commitLatency is the time from appending to applying of the last
	// entry this member applied as the leader that appended it, in
	// nanoseconds (CommitLatency).
	commitLatency atomic.Int64
	done          chan struct{}
	wg            sync.WaitGroup

	mu        sync.Mutex
	consumers map[raftq.ConsumerID]*consumerRef
	byHandle  map[queue.Consumer]raftq.ConsumerID
	// attachMu orders a consumer attaching under its own ID
	// (ConsumeOptions.ID) with a new leader detaching or suspending its
	// predecessor's consumers (former.go), and with the suspend of one
	// whose link broke (Disconnect): those must not follow the attach.
	attachMu sync.Mutex
	// orphans are the consumers reapConsumers detached and will declare
	// down after OrphanGrace unless they attach here again meanwhile.
	orphans *orphanSet
	// toSettle collects acknowledged deliveries (and deliveries to no-ack
	// consumers), which the settler goroutine proposes in batches.
	toSettle map[raftq.ConsumerID][]uint64
	// unapplied holds settlements of deliveries a new leader has not
	// applied yet (unknown.go).
	unapplied unappliedSettlements
	// orphansDetached: leading, and the consumers of the previous leader
	// are detached in the log (former.go).
	orphansDetached atomic.Bool
	// upgrading is the machine version this leader proposed last
	// (UpgradeMachine); cleared when it stops leading, as is upgradeHeld,
	// set once UpgradeMachine has logged why it could not.
	upgrading   atomic.Uint32
	upgradeHeld atomic.Bool
	settleWake  chan struct{}
	// proposeMu is held from taking settlements out of toSettle until they
	// are proposed, so that flushSettlements returns only once everything
	// acknowledged before it is in the log's order ahead of what follows.
	proposeMu sync.Mutex
	// w is the watcher of leadership and deadlines (watch.go).
	w watcher
	// settlerStarted, goMu and goStopped start the settler and the
	// watcher's goroutine on demand, and never after shutdown began
	// (its wg.Wait).
	settlerStarted atomic.Bool
	goMu           sync.Mutex
	goStopped      bool

	dl     *deadLetterer
	dlOnce sync.Once

	// fo: prompt elections when gossip reports the leader's node failed
	// (failover.go).
	fo failover
}

type consumerRef struct {
	c     queue.Consumer
	tag   string
	noAck bool
	// credit is its prefetch as the machine counts it: a settlement the
	// settler holds back keeps that much of it (settleDue).
	credit uint32
	// timeout is the consumer timeout that applies to it, for the
	// channel's error text.
	timeout time.Duration
	// attached: its attach entry, proposed here, is applied. A delivery
	// to it before that is in an entry the machine applied for an earlier
	// leader, which sent it, or did not and the consumer's attach
	// (Command.Resume) returns it; sending it from here would make two.
	attached bool
}

var _ queue.Queue = (*Replica)(nil)

func randomID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

func (r *Replica) newConsumerID() raftq.ConsumerID {
	return raftq.ConsumerID(r.idBase | (r.nextID.Add(1) & 0xffffffff))
}

func (r *Replica) isLeader() bool {
	ra := r.leaderOf.Load()
	return ra != nil && ra.State() == raft.Leader
}

// awaitLeadership waits until this member leads and has applied every
// committed entry (a barrier), so that its answers reflect the whole log.
func (r *Replica) awaitLeadership(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !r.isLeader() {
		if time.Now().After(deadline) {
			return fmt.Errorf("queue %s: no leader after %v", r.name, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.raft.Barrier(timeout).Error(); err != nil {
		return fmt.Errorf("queue %s: barrier: %w", r.name, err)
	}
	return nil
}

// propose stamps the leader's time into cmd and appends it to the log.
func (r *Replica) propose(cmd *raftq.Command) raft.ApplyFuture {
	return r.raft.Apply(stamped(cmd), 0)
}

// stamped stamps the leader's time into cmd and returns its log entry.
func stamped(cmd *raftq.Command) []byte {
	cmd.Now = time.Now().UnixMilli()
	return cmd.Append(nil)
}

// errorFor maps raft's errors to the queue boundary's.
func errorFor(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrRaftShutdown):
		return queue.ErrDeleted
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return ErrNotLeader
	}
	return err
}

// Enqueue proposes the message and calls done once it is committed: a
// publisher confirm is never sent before the entry is on a majority.
func (r *Replica) Enqueue(ctx context.Context, m *queue.Message, done func(error)) error {
	return r.enqueue(ctx, m, 0, 0, done)
}

// ErrOutOfSequence is EnqueueAs's error for a publish whose sequence
// number skips ahead of what the queue has stored for its publisher: an
// earlier publish was lost (a leader change), so the forwarder must send
// again from the first unconfirmed one.
var ErrOutOfSequence = errors.New("replica: publish out of sequence")

// ErrNotLeader is returned by operations that only the group's leader can
// carry out, when this member does not lead.
var ErrNotLeader = errors.New("replica: not the leader")

// EnqueueAs is Enqueue for a publish forwarded from another node, which
// numbers its own publishes: publisher (non-zero, random per forwarding
// stream) and seq (1, 2, 3…) let the machine store a publish re-sent after
// a leader change only once and confirm it again. Calls for one publisher
// must be made in seq order from one goroutine.
func (r *Replica) EnqueueAs(ctx context.Context, m *queue.Message, publisher, seq uint64, done func(error)) error {
	if publisher == 0 || seq == 0 {
		return fmt.Errorf("replica: EnqueueAs needs a publisher and a sequence number")
	}
	return r.enqueue(ctx, m, publisher, seq, done)
}

// pendingKey identifies a proposed publish awaiting its Confirm or Reject.
type pendingKey struct{ publisher, seq uint64 }

func (r *Replica) enqueue(ctx context.Context, m *queue.Message, publisher, seq uint64, done func(error)) error {
	if done == nil {
		done = func(error) {}
	}
	if r.stopped.Load() {
		err := r.stoppedErr()
		done(err)
		return err
	}
	if !r.isLeader() {
		done(ErrNotLeader)
		return ErrNotLeader
	}
	cmd := raftq.Command{Op: raftq.OpEnqueue, Size: uint32(len(m.Body))}
	p := &m.Properties
	if p.Flags&wire.FlagPriority != 0 || p.Priority != 0 {
		cmd.Priority, cmd.HasPriority = p.Priority, true
	}
	if p.Expiration != "" {
		if ttl, err := strconv.ParseInt(p.Expiration, 10, 64); err == nil && ttl >= 0 {
			cmd.TTL, cmd.HasTTL = ttl, true
		}
	}
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		done(ctx.Err())
		return ctx.Err()
	case <-r.done:
		err := r.stoppedErr()
		done(err)
		return err
	}
	r.pubMu.Lock()
	epoch := r.pendingEpoch.Load()
	local := publisher == 0
	if local {
		if epoch != r.seqEpoch {
			// failPending answered publishes of this member that may
			// never reach the log (held ones never do, uncommitted ones
			// a new leader may drop): numbered on after them, every
			// later one would be refused as out of sequence should
			// this member lead again. Number them as a new publisher.
			r.publisher, r.seq, r.seqEpoch = randomID(), 0, epoch
		}
		r.seq++
		publisher, seq = r.publisher, r.seq
	}
	cmd.Publisher, cmd.Seq = publisher, seq
	cmd.Now = time.Now().UnixMilli()
	// The payload is the entry's tail, so the message is encoded straight
	// after the command's fields: one allocation and one copy of the body
	// per publish.
	entry := cmd.Append(make([]byte, 0, 64+len(m.Exchange)+len(m.RoutingKey)+256+len(m.Body)))
	entry, err := appendMessage(entry, m)
	if err == nil {
		r.pendMu.Lock()
		if r.pendingEpoch.Load() != epoch {
			// failPending ran since it was numbered: answered as it
			// answered the others (under pendMu, so that no publish
			// joins pending with an epoch whose held ones are dropped).
			r.pendMu.Unlock()
			err = ErrNotLeader
		}
	}
	if err != nil {
		if local {
			r.seq--
		}
		r.pubMu.Unlock()
		<-r.slots
		done(err)
		return err
	}
	k := pendingKey{publisher, seq}
	if prev, dup := r.pending[k]; dup {
		// The same publish sent again before its first proposal was
		// answered: both are answered by whichever commits first.
		first := prev
		r.pending[k] = func(err error) { first(err); done(err) }
		<-r.slots // one slot is enough for the pair
	} else {
		r.pending[k] = done
	}
	r.pendMu.Unlock()
	r.proposePublish(entry, epoch)
	r.pubMu.Unlock()
	return nil
}

// failPending answers every publish still waiting for its commit with err:
// this member stopped leading, and whether those entries commit is now
// up to the new leader. Forwarders send them again there (the machine
// stores a re-sent publish once); local publishers get basic.nack.
func (r *Replica) failPending(err error) {
	r.pendMu.Lock()
	r.pendingEpoch.Add(1) // held publishes among these are not to be stored
	pending := r.pending
	r.pending = make(map[pendingKey]func(error))
	r.pendMu.Unlock()
	for range pending {
		<-r.slots
	}
	for _, done := range pending {
		done(err)
	}
}

// completeEnqueue answers the publish seq of publisher. The FSM calls it
// for the machine's Confirm or Reject effect, that is once the entry is
// committed and applied: never before.
func (r *Replica) completeEnqueue(publisher, seq uint64, err error) {
	k := pendingKey{publisher, seq}
	r.pendMu.Lock()
	done, ok := r.pending[k]
	delete(r.pending, k)
	r.pendMu.Unlock()
	if ok {
		<-r.slots
		done(err)
	}
}

// wait returns f's error, or raft.ErrRaftShutdown once the replica stops:
// raft leaves Apply futures that were still queued at shutdown unanswered.
func (r *Replica) wait(f raft.Future) error { return r.waitNudging(context.Background(), f, 0, nil) }

// waitUntil is wait, giving up with ctx's error when ctx ends first; f
// goes on inside raft.
func (r *Replica) waitUntil(ctx context.Context, f raft.Future) error {
	return r.waitNudging(ctx, f, 0, nil)
}

// waitNudging is waitUntil, calling nudge every interval while f is
// unanswered (never if nudge is nil).
func (r *Replica) waitNudging(ctx context.Context, f raft.Future, interval time.Duration, nudge func()) error {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	var tick <-chan time.Time
	if nudge != nil {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case err := <-errc:
			return err
		case <-tick:
			nudge()
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
			return raft.ErrRaftShutdown
		}
	}
}

// Consume attaches c through the log; deliveries start once committed.
// A consumer that attached through an earlier leader comes back under its
// ID (opts.ID) and keeps the messages it holds, as a RabbitMQ consumer
// keeps them when its queue's leader changes.
func (r *Replica) Consume(c queue.Consumer, opts queue.ConsumeOptions) error {
	id := raftq.ConsumerID(opts.ID)
	if id == 0 {
		id = r.newConsumerID()
	}
	timeout := r.queueConfig().ConsumerTimeout
	if t, ok := consumerTimeout(opts.Arguments); ok {
		timeout = t
	}
	credit := Credit(opts)
	cmd := raftq.Command{Op: raftq.OpAttach, Consumer: id, Prefetch: credit, ConsumerPriority: opts.Priority, Exclusive: opts.Exclusive}
	if t, ok := consumerTimeout(opts.Arguments); ok {
		cmd.Timeout, cmd.HasTimeout = t, true
	}
	if opts.ID != 0 {
		cmd.Resume, cmd.LastDelivery = true, opts.LastDelivery
	}
	r.attachMu.Lock()
	r.mu.Lock()
	if _, taken := r.consumers[id]; taken || id == r.getter {
		r.mu.Unlock()
		r.attachMu.Unlock()
		return fmt.Errorf("queue %s: consumer %d is attached already", r.name, id)
	}
	r.consumers[id] = &consumerRef{c: c, tag: opts.Tag, noAck: opts.NoAck, credit: credit, timeout: time.Duration(timeout) * time.Millisecond}
	r.byHandle[c] = id
	if r.orphans != nil {
		delete(r.orphans.ids, id)
	}
	r.mu.Unlock()
	f := r.propose(&cmd)
	r.attachMu.Unlock()
	err := errorFor(r.wait(f))
	if err == nil {
		if res, _ := f.Response().(*result); res != nil {
			for _, e := range res.effects {
				if e.Kind == raftq.EffectConsumerRefused {
					err = queue.ErrExclusiveConsumer
				}
			}
		}
	}
	if err != nil {
		r.forget(c)
	}
	return err
}

func consumerTimeout(args wire.Table) (int64, bool) {
	switch v := args["x-consumer-timeout"].(type) {
	case int64:
		return v, v >= 0
	case int32:
		return int64(v), v >= 0
	case int16:
		return int64(v), v >= 0
	case int8:
		return int64(v), v >= 0
	}
	return 0, false
}

func (r *Replica) forget(c queue.Consumer) raftq.ConsumerID {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.byHandle[c]
	if !ok {
		return 0
	}
	delete(r.byHandle, c)
	delete(r.consumers, id)
	return id
}

// Cancel detaches c. Its checked-out messages stay settleable by ID.
//
// The consumer stays registered until the detach is applied: the machine
// may hand it messages until then, and those must reach its channel (which
// requeues them) rather than stay checked out to nobody.
func (r *Replica) Cancel(c queue.Consumer) {
	r.mu.Lock()
	id, ok := r.byHandle[c]
	r.mu.Unlock()
	if !ok {
		return
	}
	// Its channel closes or it was cancelled: what it acknowledged goes
	// into the log ahead of the detach, so that an ack followed by
	// channel.close-ok is as durable as the detach (the settler's wait
	// would otherwise leave it to a later entry, and a crash meanwhile
	// would hand those messages out again).
	r.flushSettlements()
	r.wait(r.propose(&raftq.Command{Op: raftq.OpDetach, Consumer: id}))
	r.forget(c)
}

// Resume is a no-op: a quorum queue's deliveries are bounded by the
// consumer's credit in the machine, not by the runtime.
func (r *Replica) Resume(queue.Consumer) {}

// Get takes one message for basic.get through the log, checked out to
// this member's own getter (a channel of this node asks).
func (r *Replica) Get(noAck bool) (queue.Delivery, uint32, bool, error) {
	return r.GetAs(uint64(r.getter), noAck)
}

// GetAs takes one message for basic.get through the log, checked out to
// getter: a forwarded get names the ID its node chose (owned.go).
func (r *Replica) GetAs(getter uint64, noAck bool) (queue.Delivery, uint32, bool, error) {
	if r.queueConfig().SingleActiveConsumer {
		// Refused before the log, as RabbitMQ's channel does (405).
		return queue.Delivery{}, 0, false, queue.ErrGetUnsupported
	}
	r.flushPublishes() // a get sees what was published before it
	r.attachMu.Lock()  // a release of a forwarded get's getter waits for it (SettleOwned)
	if getter != uint64(r.getter) {
		r.foreignGets.Add(1)
		defer r.foreignGets.Add(-1)
	}
	f := r.propose(&raftq.Command{Op: raftq.OpGet, Consumer: raftq.ConsumerID(getter), NoAck: noAck})
	r.attachMu.Unlock()
	if err := errorFor(r.wait(f)); err != nil {
		return queue.Delivery{}, 0, false, err
	}
	res, _ := f.Response().(*result)
	if res == nil {
		return queue.Delivery{}, 0, false, nil
	}
	for _, e := range res.effects {
		switch e.Kind {
		case raftq.EffectGetEmpty:
			return queue.Delivery{}, 0, false, nil
		case raftq.EffectGetResult:
			msg, err := r.readMessage(e.Index)
			if err != nil {
				return queue.Delivery{}, 0, false, err
			}
			return queue.Delivery{ID: e.Delivery, Message: withCounts(msg, e), Redelivered: e.Redelivered}, e.Count, true, nil
		}
	}
	return queue.Delivery{}, 0, false, nil
}

// Settle acknowledges deliveries. The settler proposes them in batches:
// acks are not confirmed to anyone, so a log entry per basic.ack would
// only cost.
func (r *Replica) Settle(ids []uint64) {
	if r.settleAsFormer(raftq.OpSettle, 0, ids) {
		return
	}
	order, groups, unknown := r.byHolder(ids)
	r.mu.Lock()
	for _, c := range order {
		r.toSettle[c] = append(r.toSettle[c], groups[c]...)
	}
	r.mu.Unlock()
	r.wakeSettler()
	r.settleUnknown(raftq.OpSettle, 0, unknown)
}

// markAttached records that consumer's attach, proposed here, is applied.
func (r *Replica) markAttached(consumer raftq.ConsumerID) {
	r.mu.Lock()
	if ref := r.consumers[consumer]; ref != nil {
		ref.attached = true
	}
	r.mu.Unlock()
}

func (r *Replica) wakeSettler() {
	if !r.settlerStarted.Load() {
		// The settler starts with the first settlement: most of a
		// node's thousand queues may never see one, and an idle
		// goroutine still costs a stack.
		r.goMu.Lock()
		if !r.goStopped && !r.settlerStarted.Load() {
			r.settlerStarted.Store(true)
			r.wg.Add(1)
			go r.settler()
		}
		r.goMu.Unlock()
	}
	select {
	case r.settleWake <- struct{}{}:
	default:
	}
}

// Requeue returns deliveries; the cause decides the delivery-count.
func (r *Replica) Requeue(ids []uint64, cause queue.ReturnCause) {
	if r.settleAsFormer(raftq.OpReturn, cause, ids) {
		return
	}
	order, groups, unknown := r.byHolder(ids)
	for _, c := range order {
		r.propose(&raftq.Command{Op: raftq.OpReturn, Consumer: c, IDs: groups[c], Cause: raftq.ReturnCause(cause)})
	}
	r.settleUnknown(raftq.OpReturn, cause, unknown)
}

// Discard drops (or dead-letters) rejected deliveries.
func (r *Replica) Discard(ids []uint64, cause queue.ReturnCause) {
	if r.settleAsFormer(raftq.OpDiscard, cause, ids) {
		return
	}
	order, groups, unknown := r.byHolder(ids)
	for _, c := range order {
		r.propose(&raftq.Command{Op: raftq.OpDiscard, Consumer: c, IDs: groups[c], Cause: raftq.ReturnCause(cause)})
	}
	r.settleUnknown(raftq.OpDiscard, cause, unknown)
}

// Purge removes the ready messages through the log.
func (r *Replica) Purge() (uint32, error) {
	r.flushPublishes() // purged with the rest
	f := r.propose(&raftq.Command{Op: raftq.OpPurge})
	if err := errorFor(r.wait(f)); err != nil {
		return 0, err
	}
	if res, _ := f.Response().(*result); res != nil {
		for _, e := range res.effects {
			if e.Kind == raftq.EffectPurged {
				return e.Count, nil
			}
		}
	}
	return 0, nil
}

// Stats counts the queue's contents as this member has applied them.
func (r *Replica) Stats() queue.Stats {
	r.awaitApplied(statsWait)
	r.fsm.mu.Lock()
	st := r.fsm.m.Stats()
	r.fsm.mu.Unlock()
	return queue.Stats{Ready: uint32(st.Ready), Unacked: uint32(st.Unacked), Consumers: uint32(st.Consumers), DeadLettered: uint32(st.DeadLettered), Delayed: uint32(st.Delayed)}
}

// statsWait bounds how long Stats waits for a new leader to apply what
// was committed before its election: less than a forwarded call allows.
const statsWait = 1500 * time.Millisecond

// awaitApplied waits, up to d, while this member leads but has not yet
// applied every entry committed before its election: until then its
// machine may lack them (after a whole cluster restarts, nothing is
// applied before the new leader's first commit, and the queue would
// count no messages). Followers and settled leaders return at once.
func (r *Replica) awaitApplied(d time.Duration) {
	deadline := time.Now().Add(d)
	for r.isLeader() && !r.leaderApplied.Load() && !r.stopped.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// Delete stops the group and removes its files. The broker refuses
// if-unused and if-empty for quorum queues, as RabbitMQ does.
func (r *Replica) Delete(ifUnused, ifEmpty bool) (uint32, error) {
	st := r.Stats()
	if ifUnused && st.Consumers > 0 {
		return 0, queue.ErrInUse
	}
	if ifEmpty && st.Ready > 0 {
		return 0, queue.ErrNotEmpty
	}
	r.mu.Lock()
	gone := make([]queue.Consumer, 0, len(r.consumers))
	for _, c := range r.consumers {
		gone = append(gone, c.c)
	}
	r.mu.Unlock()
	r.shutdown(queue.ErrDeleted)
	for _, c := range gone {
		c.Gone()
	}
	if r.cfg.WAL != nil {
		if err := r.cfg.WAL.DropGroup(logGroup(r.cfg)); err != nil {
			r.log.Error("drop the queue's log", "err", err)
		}
	}
	if err := os.RemoveAll(r.dir); err != nil {
		r.log.Error("remove queue files", "dir", r.dir, "err", err)
	}
	return st.Ready, nil
}

// Close stops the replica, keeping its files for the next start. Publishes
// still waiting for their commit are answered ErrNotLeader: forwarders send
// them on to the group's next leader.
func (r *Replica) Close() { r.shutdown(ErrNotLeader) }

// lingerer is a transport whose heartbeats may wait to share a call with
// other groups' (cluster/transport's Transport.StopLingering).
type lingerer interface {
	StopLingering()
}

// shutdown stops the replica and answers waiting publishes with pendingErr.
func (r *Replica) shutdown(pendingErr error) {
	r.stopErr.CompareAndSwap(nil, &pendingErr)
	if !r.stopped.CompareAndSwap(false, true) {
		return
	}
	if l, ok := r.cfg.Transport.(lingerer); ok {
		l.StopLingering() // raft.Shutdown waits for the heartbeats
	}
	if r.raft != nil {
		if err := r.raft.Shutdown().Error(); err != nil {
			r.log.Warn("raft shutdown", "err", err)
		}
	}
	r.goMu.Lock()
	r.goStopped = true // no goroutine starts after this: wg.Wait follows
	r.goMu.Unlock()
	close(r.done)
	r.wg.Wait()
	r.failPending(pendingErr) // the enqueues still waiting for a confirm
	r.recent.clear()          // back to the node's payload cache
	if err := r.closeStore(); err != nil {
		r.log.Warn("close raft log", "err", err)
	}
}

// stoppedErr is the answer to a publish that reaches the replica once it
// has stopped. A Publish stream opened before a hibernation holds the
// closed replica: "not the leader" ends that stream, and the forwarder
// finds the reopened one.
func (r *Replica) stoppedErr() error {
	if err := r.stopErr.Load(); err != nil {
		return *err
	}
	return queue.ErrDeleted
}

// IsLeader reports whether this member leads the group now.
func (r *Replica) IsLeader() bool { return r.isLeader() }

// Name is the queue's name in logs ("vhost/name").
func (r *Replica) Name() string { return r.cfg.Name }

// Leader is the node name of the group's leader as this member knows it,
// "" while there is none.
func (r *Replica) Leader() string {
	ra := r.leaderOf.Load()
	if ra == nil {
		return ""
	}
	_, id := ra.LeaderWithID()
	return string(id)
}

// TransferLeadership hands the group's leadership to member id at addr,
// which must be caught up enough to take it (raft's TimeoutNow). It
// returns once the transfer has completed or failed; this member must
// lead.
func (r *Replica) TransferLeadership(id, addr string) error {
	if !r.isLeader() {
		return ErrNotLeader
	}
	r.settleBeforeTransfer()
	return errorFor(r.wait(r.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))))
}

// MemberStatus is a member's own view of its group, for operators.
type MemberStatus struct {
	State        string // Leader, Follower, Candidate, Shutdown
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastLogIndex uint64
	// SnapshotIndex is the index of this member's latest snapshot: its
	// log holds no entry below it but those of live messages.
	SnapshotIndex uint64
	Voter         bool
}

// Status reports this member's view of the group.
func (r *Replica) Status() MemberStatus {
	st := MemberStatus{State: r.raft.State().String()}
	num := raftStats(r.raft)
	st.Term = num("term")
	st.CommitIndex = num("commit_index")
	st.AppliedIndex = num("applied_index")
	st.LastLogIndex = num("last_log_index")
	st.SnapshotIndex = num("last_snapshot_index")
	if f := r.raft.GetConfiguration(); f.Error() == nil {
		servers := f.Configuration().Servers
		if conf := r.fo.lateConf.Load(); len(servers) == 0 && conf != nil {
			// A new group's member that has not heard from the member
			// chosen to lead yet: the group's first configuration,
			// which it keeps (failover.go), is what it will have.
			servers = conf.Servers
		}
		for _, s := range servers {
			if s.ID == raft.ServerID(r.cfg.NodeID) {
				st.Voter = s.Suffrage == raft.Voter
			}
		}
	}
	return st
}

// raftStats reads ra's Stats once and returns a lookup of its numbers
// (zero for a missing or non-numeric key).
func raftStats(ra *raft.Raft) func(key string) uint64 {
	st := ra.Stats()
	return func(key string) uint64 {
		n, _ := strconv.ParseUint(st[key], 10, 64)
		return n
	}
}

// Membership changes (cluster/node's membership.go drives them). Each
// must be made on the leader and returns once the new configuration is
// committed; index is its log index.

// AddNonvoter adds node id at addr as a non-voter: the leader sends it
// the log (or a snapshot) but commits do not wait for it.
func (r *Replica) AddNonvoter(id, addr string) (index uint64, err error) {
	if !r.isLeader() {
		return 0, ErrNotLeader
	}
	if err := r.canJoin(id); err != nil {
		return 0, err
	}
	f := r.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 0)
	if err := errorFor(r.wait(f)); err != nil {
		return 0, err
	}
	return f.Index(), nil
}

// AddVoter makes node id at addr a voter (promoting a non-voter).
func (r *Replica) AddVoter(id, addr string) (index uint64, err error) {
	if !r.isLeader() {
		return 0, ErrNotLeader
	}
	f := r.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 0)
	if err := errorFor(r.waitPromotion(f)); err != nil {
		return 0, err
	}
	return f.Index(), nil
}

// promotionNudge is how long a promotion waits for its commit before the
// leader appends an entry after it (waitPromotion).
const promotionNudge = 500 * time.Millisecond

// waitPromotion is wait for AddVoter's future. hashicorp/raft writes and
// replicates a configuration entry before it counts the new voters in its
// commitment (appendConfigurationEntry: dispatchLogs, then
// commitment.setConfiguration), so an acknowledgement of the entry from
// the promoted member that comes back in between is not counted, and
// later AppendEntries carry no entry to acknowledge again. When the
// promoted member's vote is needed for a majority (another member is
// down) the entry then commits only once another entry follows: never,
// on an idle queue (seen as a transport test hanging under CI's load). So
// while the promotion waits, a barrier entry follows it every
// promotionNudge (not waited for: it only has to be appended).
func (r *Replica) waitPromotion(f raft.Future) error {
	return r.waitNudging(context.Background(), f, promotionNudge, func() { r.raft.Barrier(promotionNudge) })
}

// RemoveServer removes node id from the group. Asked to remove itself,
// the leader hands its leadership off instead and answers ErrNotLeader,
// so that the caller asks the new leader: a leader that commits its own
// removal steps down without telling anyone, and the others wait out
// their heartbeat timeout, 30 s or more for queue groups, before they
// elect a new one. The chaos harness saw it, when a member's removal
// found a leader that had moved a moment before.
func (r *Replica) RemoveServer(id string) (index uint64, err error) {
	if !r.isLeader() {
		return 0, ErrNotLeader
	}
	if id == r.cfg.NodeID {
		r.settleBeforeTransfer()
		if err := errorFor(r.wait(r.raft.LeadershipTransfer())); err != nil {
			r.log.Debug("hand off before removing this member", "err", err)
		}
		return 0, ErrNotLeader
	}
	f := r.raft.RemoveServer(raft.ServerID(id), 0, 0)
	if err := errorFor(r.wait(f)); err != nil {
		return 0, err
	}
	return f.Index(), nil
}

// Servers is the group's latest configuration as this member knows it:
// node name to whether it votes.
func (r *Replica) Servers() (map[string]bool, error) {
	f := r.raft.GetConfiguration()
	if err := errorFor(f.Error()); err != nil {
		return nil, err
	}
	out := make(map[string]bool)
	for _, s := range f.Configuration().Servers {
		out[string(s.ID)] = s.Suffrage == raft.Voter
	}
	return out, nil
}

// Remove stops this member after the group removed it from its
// configuration, and deletes its files: the queue lives on in the other
// members. Publishes still waiting here are answered ErrNotLeader and
// consumers that can follow the leader are told LeaderLost, so that both
// go on at the leader elsewhere.
func (r *Replica) Remove() {
	r.mu.Lock()
	consumers := make([]queue.Consumer, 0, len(r.consumers))
	for _, c := range r.consumers {
		consumers = append(consumers, c.c)
	}
	r.mu.Unlock()
	r.shutdown(ErrNotLeader)
	for _, c := range consumers {
		if m, ok := c.(queue.Movable); ok {
			m.LeaderLost()
		} else {
			c.Gone()
		}
	}
	if r.cfg.WAL != nil {
		if err := r.cfg.WAL.DropGroup(logGroup(r.cfg)); err != nil {
			r.log.Error("drop the removed member's log", "err", err)
		}
	}
	if err := os.RemoveAll(r.dir); err != nil {
		r.log.Error("remove the removed member's files", "dir", r.dir, "err", err)
	}
}
