package replica

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// consumerTable is the consumers attached through this member, which a
// leader delivers to, and the acknowledgements it collects for the
// settler; mu guards both, so that a leader that stops leading takes the
// consumers and what they acknowledged at once (onFollowing). It also
// keeps a new leader's predecessor's consumers that have yet to attach
// again (orphans, former.go).
type consumerTable struct {
	r *Replica

	// foreignGets counts the gets with a getter of their own (GetAs with
	// an ID the asking node chose) proposed and not yet answered
	// (owned.go's releasesPending).
	foreignGets atomic.Int32

	mu       sync.Mutex
	byID     map[raftq.ConsumerID]*consumerRef
	byHandle map[queue.Consumer]raftq.ConsumerID
	// attachMu orders a consumer attaching under its own ID
	// (ConsumeOptions.ID) with a new leader detaching or suspending its
	// predecessor's consumers (former.go), and with the suspend of one
	// whose link broke (Disconnect): those must not follow the attach.
	attachMu sync.Mutex
	// orphans are the consumers reap detached and will declare
	// down after OrphanGrace unless they attach here again meanwhile.
	orphans *orphanSet
	// toSettle collects acknowledged deliveries (and deliveries to no-ack
	// consumers), which the settler goroutine proposes in batches.
	toSettle map[raftq.ConsumerID][]uint64
	// orphansDetached: leading, and the consumers of the previous leader
	// are detached in the log (former.go).
	orphansDetached atomic.Bool
}

// add registers ref under id for its consumer, unless id is taken (by a
// consumer attached here, or by this member's getter); one of a reap's
// orphans is one no more. Called with attachMu held.
func (t *consumerTable) add(id raftq.ConsumerID, ref *consumerRef) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, taken := t.byID[id]; taken || id == t.r.getter {
		return false
	}
	t.byID[id] = ref
	t.byHandle[ref.c] = id
	if t.orphans != nil {
		delete(t.orphans.ids, id)
	}
	return true
}

// lookup finds the consumer attached here with handle c.
func (t *consumerTable) lookup(c queue.Consumer) (raftq.ConsumerID, *consumerRef, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.byHandle[c]
	return id, t.byID[id], ok
}

// attached reports whether consumer id is attached here.
func (t *consumerTable) attached(id raftq.ConsumerID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byID[id]
	return ok
}

// handles lists the consumers attached here.
func (t *consumerTable) handles() []queue.Consumer {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]queue.Consumer, 0, len(t.byID))
	for _, c := range t.byID {
		out = append(out, c.c)
	}
	return out
}

// busy counts the consumers attached here and those with
// acknowledgements in hand.
func (t *consumerTable) busy() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID) + len(t.toSettle)
}

// queueAck adds consumer's acknowledgements of messages for the settler.
func (t *consumerTable) queueAck(consumer raftq.ConsumerID, messages []uint64) {
	t.mu.Lock()
	t.toSettle[consumer] = append(t.toSettle[consumer], messages...)
	t.mu.Unlock()
}

// queueAcks adds the acknowledgements of groups, by consumer in order,
// for the settler.
func (t *consumerTable) queueAcks(order []raftq.ConsumerID, groups map[raftq.ConsumerID][]uint64) {
	t.mu.Lock()
	for _, c := range order {
		t.toSettle[c] = append(t.toSettle[c], groups[c]...)
	}
	t.mu.Unlock()
}

// takeAcks takes the acknowledgements in hand for the settler to propose;
// nil if there are none.
func (t *consumerTable) takeAcks() map[raftq.ConsumerID][]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	batch := t.toSettle
	if len(batch) == 0 {
		return nil // batch is the live map: leave it alone
	}
	t.toSettle = make(map[raftq.ConsumerID][]uint64, len(batch))
	return batch
}

// dropAll empties the table when this member stops leading, and returns
// the consumers and their acknowledgements in hand, taken together.
func (t *consumerTable) dropAll() (consumers map[raftq.ConsumerID]*consumerRef, acks map[raftq.ConsumerID][]uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	consumers, acks = t.byID, t.toSettle
	t.byID = make(map[raftq.ConsumerID]*consumerRef)
	t.byHandle = make(map[queue.Consumer]raftq.ConsumerID)
	t.toSettle = make(map[raftq.ConsumerID][]uint64)
	return consumers, acks
}

// ConsumerInfo is one of the queue's consumer records as its leader sees
// it (warrenctl quorum consumers): the machine's view, and what the leader
// knows of the consumer that attached through it.
type ConsumerInfo struct {
	raftq.ConsumerView
	// Attached here: Tag, Origin and AckRequired are known. A consumer
	// record the leader has no attachment for is cancelled, a basic.get
	// owner, or one that attached through an earlier leader and has not
	// come back yet.
	Here bool
	Tag  string
	// Origin is the node whose channel consumes; "" for this node.
	Origin      string
	AckRequired bool
}

// Consumers lists the queue's consumer records, by ID. Only the leader
// knows who attached: a member that does not lead answers ErrNotLeader.
func (r *Replica) Consumers() ([]ConsumerInfo, error) {
	r.awaitApplied(statsWait)
	if !r.isLeader() {
		return nil, ErrNotLeader
	}
	r.fsm.mu.Lock()
	views := r.fsm.m.AppendConsumers(nil)
	r.fsm.mu.Unlock()
	out := make([]ConsumerInfo, len(views))
	r.consumers.describe(views, out)
	return out, nil
}

// describe fills out, one record per view, with what the table knows
// of the consumers attached here.
func (t *consumerTable) describe(views []raftq.ConsumerView, out []ConsumerInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, v := range views {
		out[i].ConsumerView = v
		ref := t.byID[v.ID]
		if ref == nil {
			continue
		}
		out[i].Here, out[i].Tag, out[i].AckRequired = true, ref.tag, !ref.noAck
		if o, ok := ref.c.(queue.Origin); ok {
			out[i].Origin = o.Origin()
		}
	}
}

func (t *consumerTable) forget(c queue.Consumer) raftq.ConsumerID {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.byHandle[c]
	if !ok {
		return 0
	}
	delete(t.byHandle, c)
	delete(t.byID, id)
	return id
}

// markAttached records that consumer's attach, proposed here, is applied.
func (t *consumerTable) markAttached(consumer raftq.ConsumerID) {
	t.mu.Lock()
	if ref := t.byID[consumer]; ref != nil {
		ref.attached = true
	}
	t.mu.Unlock()
}

func (t *consumerTable) deliver(e raftq.Effect) {
	t.mu.Lock()
	ref := t.byID[e.Consumer]
	if ref != nil && !ref.attached {
		ref = nil // an earlier leader's delivery
	}
	var id uint64
	if ref != nil {
		if ref.noAck {
			t.toSettle[e.Consumer] = append(t.toSettle[e.Consumer], e.Index)
		} else {
			id = e.Delivery
		}
	}
	t.mu.Unlock()
	if ref == nil {
		return // its channel is going (ConsumerDown follows), or an earlier leader's delivery
	}
	msg, err := t.r.storage.readMessage(e.Index)
	if err != nil {
		t.r.log.Error("read message for delivery", "index", e.Index, "err", err)
		return
	}
	ref.c.Deliver(queue.Delivery{ID: id, Message: withCounts(msg, e), Redelivered: e.Redelivered})
	if ref.noAck {
		t.r.settler.wakeUp()
	}
}

// timedOut handles a consumer timeout: the timed-out messages are
// back in the queue and the machine detached the consumer; the channel
// tells the client (basic.cancel, or a 406 channel error). A basic.get
// delivery that timed out has no consumer to tell: the getter is shared
// by every channel, so its message just returns.
func (t *consumerTable) timedOut(e raftq.Effect) {
	t.mu.Lock()
	ref := t.byID[e.Consumer]
	if ref != nil {
		delete(t.byID, e.Consumer)
		delete(t.byHandle, ref.c)
	}
	t.mu.Unlock()
	if ref != nil {
		go ref.c.TimedOut(ref.timeout)
	}
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
	r.consumers.attachMu.Lock()
	ref := &consumerRef{c: c, tag: opts.Tag, noAck: opts.NoAck, credit: credit, timeout: time.Duration(timeout) * time.Millisecond}
	if !r.consumers.add(id, ref) {
		r.consumers.attachMu.Unlock()
		return fmt.Errorf("queue %s: consumer %d is attached already", r.name, id)
	}
	f := r.propose(&cmd)
	r.consumers.attachMu.Unlock()
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
		r.consumers.forget(c)
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

// Cancel detaches c. Its checked-out messages stay settleable by ID.
//
// The consumer stays registered until the detach is applied: the machine
// may hand it messages until then, and those must reach its channel (which
// requeues them) rather than stay checked out to nobody.
func (r *Replica) Cancel(c queue.Consumer) {
	id, _, ok := r.consumers.lookup(c)
	if !ok {
		return
	}
	// Its channel closes or it was cancelled: what it acknowledged goes
	// into the log ahead of the detach, so that an ack followed by
	// channel.close-ok is as durable as the detach (the settler's wait
	// would otherwise leave it to a later entry, and a crash meanwhile
	// would hand those messages out again).
	r.settler.flush()
	r.wait(r.propose(&raftq.Command{Op: raftq.OpDetach, Consumer: id}))
	r.consumers.forget(c)
}

// Resume is a no-op: a quorum queue's deliveries are bounded by the
// consumer's credit in the machine, not by the runtime.
func (r *Replica) Resume(queue.Consumer) {}
