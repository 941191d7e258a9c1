// Package classic is the classic queue: the raftq state machine run
// without Raft, so that a transient classic queue follows the quorum queue's rules (TTL, length limits,
// dead-lettering, single active consumer, consumer timeout, x-expires)
// instead of keeping a second copy of them.
//
// Commands are applied synchronously under the queue's mutex, each with
// the next local index (a message's ID is its enqueue's index, as in a
// quorum queue). Memory is the storage: payloads are kept in a map by
// index until the machine forgets the message. Effects are carried out at
// once: a publish is confirmed (or refused) before Enqueue returns,
// deliveries go to consumers under the lock as the queue.Consumer contract
// allows, and dead letters are published in order by a goroutine of the
// queue, never with its lock held.
//
// Classic semantics kept on top of the machine: RabbitMQ classic
// priorities (x-max-priority; unset is 0), x-overflow reject-publish-dlx
// (the refused message is also dead-lettered, reason maxlen), no delivery
// limit and no x-delivery-count headers, basic.get allowed with single
// active consumer, auto-delete after the last consumer leaves (OnUnused).
package classic

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// Config is what a local queue needs.
type Config struct {
	// Name identifies the queue in logs.
	Name string
	// Arguments are the queue's declared x-arguments.
	Arguments wire.Table
	// Created is the queue's creation time (Unix ms); zero is now.
	Created int64
	// Budget, if set, counts the payload bytes this queue holds towards
	// the node's memory alarm.
	Budget *queue.Budget
	// OnUnused is called (on its own goroutine, at most once) when the
	// last consumer is cancelled after at least one had attached: the
	// broker deletes auto-delete queues then.
	OnUnused func()
	// OnExpired is called (on its own goroutine) when x-expires says the
	// queue should be deleted.
	OnExpired func()
	// DeadLetter publishes a message the queue dead-lettered, as
	// replica.Config.DeadLetter. It may block; it is called from one
	// goroutine of the queue, in order, never with the queue's lock held.
	// Nil drops dead-lettered messages.
	DeadLetter func(ctx context.Context, m *queue.Message, reason raftq.Reason, at int64, done func(error))
	Log        *slog.Logger
}

// defaultCredit stands in for unlimited prefetch and no-ack consumers, as
// in the replica: the machine needs a bound on what it hands a consumer.
const defaultCredit = raftq.UnlimitedPrefetch

// publisher is the machine's publisher ID for every publish: Enqueue is
// synchronous, so one tracked publisher with a running seq gets each
// publish its Confirm or Reject effect.
const publisher = 1

// ParseConfig reads a classic queue's arguments into the machine's
// Config: the quorum parser's rules, then the classic differences.
func ParseConfig(args wire.Table) (cfg raftq.Config, dlxOnReject bool, err error) {
	cfg, err = raftq.ParseConfig(map[string]any(args))
	if err != nil {
		return cfg, false, err
	}
	// Classic queues have no delivery limit, no delayed retry and only
	// at-most-once dead-lettering (x-delivery-limit, x-delayed-retry-* and
	// x-dead-letter-strategy are quorum queue arguments).
	cfg.DeliveryLimit = raftq.Unset
	cfg.Retry = raftq.DelayedRetry{}
	cfg.Strategy = raftq.AtMostOnce
	if args["x-overflow"] == "reject-publish-dlx" {
		cfg.Overflow = raftq.RejectPublish
		dlxOnReject = true
	}
	cfg.ClassicPriority = true
	if v, ok := args["x-max-priority"]; ok {
		n, isInt := wire.IntValue(v)
		switch {
		case !isInt:
			return cfg, false, &raftq.ArgError{Key: "x-max-priority", Detail: "{unacceptable_type," + wire.TypeName(v) + "}"}
		case n < 0:
			return cfg, false, &raftq.ArgError{Key: "x-max-priority", Detail: fmt.Sprintf("{value_negative,%d}", n)}
		case n > 255:
			return cfg, false, &raftq.ArgError{Key: "x-max-priority", Detail: fmt.Sprintf("{max_value_exceeded,%d}", n)}
		}
		cfg.MaxPriority = uint8(n)
	}
	return cfg, dlxOnReject, nil
}

// Queue is a classic queue run by the raftq machine in memory.
type Queue struct {
	cfg         Config
	log         *slog.Logger
	dlxOnReject bool
	sac         bool

	mu      sync.Mutex
	m       *raftq.Machine
	index   uint64
	seq     uint64
	effects []raftq.Effect
	stopped bool
	// msgs holds the payload of every message the machine may still
	// reference, by index; bytes is their body bytes (fed to Budget).
	msgs  map[uint64]*queue.Message
	bytes int64

	nextConsumer raftq.ConsumerID
	getter       raftq.ConsumerID
	consumers    map[raftq.ConsumerID]*consumerRef
	byHandle     map[queue.Consumer]raftq.ConsumerID
	// noAckSettle are deliveries to no-ack consumers to settle once the
	// current command's effects are carried out.
	noAckSettle  map[raftq.ConsumerID][]uint64
	attachedEver bool
	unusedFired  bool
	// toPause are consumers whose Deliver returned false, to be given no
	// more credit once the current command's effects are carried out.
	toPause []raftq.ConsumerID
	// after are callbacks to run once the lock is released.
	after []func()

	timer   *time.Timer
	armedAt int64 // deadline the timer is set for; 0 when unarmed

	dl *deadLetterer
}

type consumerRef struct {
	c       queue.Consumer
	noAck   bool
	paused  bool
	timeout time.Duration
	// attach is the consumer's attach command, to restore its credit on
	// Resume.
	attach raftq.Command
}

var _ queue.Queue = (*Queue)(nil)

// New returns an empty queue configured by cfg.Arguments.
func New(cfg Config) (*Queue, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Created == 0 {
		cfg.Created = time.Now().UnixMilli()
	}
	mcfg, dlxOnReject, err := ParseConfig(cfg.Arguments)
	if err != nil {
		return nil, fmt.Errorf("queue arguments: %w", err)
	}
	q := &Queue{
		cfg:         cfg,
		log:         cfg.Log.With("queue", cfg.Name),
		dlxOnReject: dlxOnReject,
		sac:         mcfg.SingleActiveConsumer,
		m:           raftq.New(mcfg, cfg.Created),
		msgs:        make(map[uint64]*queue.Message),
		consumers:   make(map[raftq.ConsumerID]*consumerRef),
		byHandle:    make(map[queue.Consumer]raftq.ConsumerID),
		noAckSettle: make(map[raftq.ConsumerID][]uint64),
	}
	q.getter = q.newConsumerID()
	q.dl = newDeadLetterer(q)
	q.timer = time.AfterFunc(time.Hour, q.tick)
	q.timer.Stop()
	q.mu.Lock()
	q.rearm() // x-expires counts from creation
	q.mu.Unlock()
	return q, nil
}

func (q *Queue) newConsumerID() raftq.ConsumerID {
	q.nextConsumer++
	return q.nextConsumer
}

// Config is the machine configuration the queue runs with.
func (q *Queue) Config() raftq.Config {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.m.Config()
}

// unlock releases the lock and runs the callbacks collected under it.
func (q *Queue) unlock() {
	after := q.after
	q.after = nil
	q.mu.Unlock()
	for _, f := range after {
		f()
	}
}

// apply runs cmd through the machine with the next index and carries out
// its effects. The effects a caller needs an answer from are returned
// (valid until the next apply). q.mu is held.
func (q *Queue) apply(cmd *raftq.Command) []raftq.Effect {
	out := q.applyOne(cmd)
	q.pause()
	// No-ack deliveries are settled at once (as rabbit_fifo_client does),
	// which frees credit and may deliver more: repeat until quiet. A paused
	// consumer's are kept, holding its credit until Resume.
	for q.settleNoAck() {
		q.pause()
	}
	q.rearm()
	return out
}

// pause holds the credit of the consumers whose Deliver returned false:
// re-attached with prefetch 1 (with at least the message just delivered
// checked out, the machine hands them nothing) until Resume restores
// their prefetch. This keeps a stalled consumer's backlog in the queue,
// not in its connection's buffer.
func (q *Queue) pause() {
	for len(q.toPause) > 0 {
		ids := q.toPause
		q.toPause = nil
		for _, id := range ids {
			ref := q.consumers[id]
			if ref == nil || !ref.paused {
				continue
			}
			cmd := ref.attach
			cmd.Prefetch = 1
			q.applyOne(&cmd)
		}
	}
}

func (q *Queue) applyOne(cmd *raftq.Command) []raftq.Effect {
	q.index++
	cmd.Now = time.Now().UnixMilli()
	q.effects = q.m.Apply(raftq.Meta{Index: q.index}, cmd, q.effects[:0])
	var answers []raftq.Effect
	for _, e := range q.effects {
		switch e.Kind {
		case raftq.EffectDeliver:
			q.deliver(e)
		case raftq.EffectCancelConsumer:
			ref := q.consumers[e.Consumer]
			if ref != nil {
				delete(q.consumers, e.Consumer)
				delete(q.byHandle, ref.c)
				delete(q.noAckSettle, e.Consumer)
				c, timeout := ref.c, ref.timeout
				q.after = append(q.after, func() { c.TimedOut(timeout) })
				q.maybeUnused()
			}
		case raftq.EffectDeleteQueue:
			if q.cfg.OnExpired != nil {
				q.after = append(q.after, func() { go q.cfg.OnExpired() })
			}
		case raftq.EffectDeadLetter:
			if m := q.forget(e.Index); m != nil {
				q.dl.add(m, e.Reason, e.Time)
			}
		case raftq.EffectDrop:
			q.forget(e.Index)
		default:
			answers = append(answers, e)
		}
	}
	return answers
}

// settleNoAck settles the deliveries to no-ack consumers that are not
// paused; it reports whether it applied anything.
func (q *Queue) settleNoAck() bool {
	did := false
	for c, ids := range q.noAckSettle {
		if ref := q.consumers[c]; ref != nil && ref.paused {
			continue
		}
		delete(q.noAckSettle, c)
		q.settle(c, ids)
		did = true
	}
	return did
}

// settle applies a settle and drops the payloads it freed.
func (q *Queue) settle(c raftq.ConsumerID, ids []uint64) {
	before := q.m.Stats().Unacked
	q.applyOne(&raftq.Command{Op: raftq.OpSettle, Consumer: c, IDs: ids})
	// The settle may hand out more messages at once (the credit it freed):
	// count them back in before comparing.
	delivered := 0
	for _, e := range q.effects {
		if e.Kind == raftq.EffectDeliver {
			delivered++
		}
	}
	if before-q.m.Stats().Unacked+delivered == len(ids) {
		for _, i := range ids {
			q.forget(i)
		}
		return
	}
	// Some were stale (taken back by a consumer timeout): keep exactly
	// what the machine still references.
	q.collect()
}

func (q *Queue) deliver(e raftq.Effect) {
	ref := q.consumers[e.Consumer]
	m := q.msgs[e.Index]
	if ref == nil || m == nil {
		q.log.Error("delivery to an unknown consumer or of an unknown message", "consumer", e.Consumer, "index", e.Index)
		return
	}
	var id uint64
	if ref.noAck {
		q.noAckSettle[e.Consumer] = append(q.noAckSettle[e.Consumer], e.Index)
	} else {
		id = e.Delivery
	}
	if !ref.c.Deliver(queue.Delivery{ID: id, Message: m, Redelivered: e.Redelivered}) && !ref.paused {
		ref.paused = true
		q.toPause = append(q.toPause, e.Consumer)
	}
}

// store keeps a payload. q.mu is held.
func (q *Queue) store(index uint64, m *queue.Message) {
	q.msgs[index] = m
	n := int64(len(m.Body))
	q.bytes += n
	q.cfg.Budget.Add(n)
}

// forget drops a payload the machine no longer references and returns it.
func (q *Queue) forget(index uint64) *queue.Message {
	m := q.msgs[index]
	if m == nil {
		return nil
	}
	delete(q.msgs, index)
	n := int64(len(m.Body))
	q.bytes -= n
	q.cfg.Budget.Release(n)
	return m
}

// collect drops every payload the machine no longer references. Its cost
// is proportional to the queue's messages; it runs after purges and stale
// settles only.
func (q *Queue) collect() {
	live := q.m.AppendLiveIndexes(make([]uint64, 0, len(q.msgs)))
	if len(live) == len(q.msgs) {
		return
	}
	keep := make(map[uint64]bool, len(live))
	for _, i := range live {
		keep[i] = true
	}
	for i := range q.msgs {
		if !keep[i] {
			q.forget(i)
		}
	}
}

// maybeUnused fires OnUnused once the last consumer has gone. q.mu is held.
func (q *Queue) maybeUnused() {
	if q.attachedEver && !q.unusedFired && len(q.consumers) == 0 && q.cfg.OnUnused != nil {
		q.unusedFired = true
		q.after = append(q.after, func() { go q.cfg.OnUnused() })
	}
}

// rearm sets the timer for the machine's next deadline. q.mu is held.
func (q *Queue) rearm() {
	if q.stopped {
		return
	}
	at, ok := q.m.NextDeadline()
	if !ok || (q.armedAt != 0 && q.armedAt <= at) {
		return
	}
	q.armedAt = at
	q.timer.Reset(max(time.Until(time.UnixMilli(at)), time.Millisecond))
}

// tick applies a Tick when the timer fires: expiries, consumer timeouts
// and x-expires happen here.
func (q *Queue) tick() {
	q.mu.Lock()
	q.armedAt = 0
	if q.stopped {
		q.mu.Unlock()
		return
	}
	if at, ok := q.m.NextDeadline(); ok && at <= time.Now().UnixMilli() {
		q.apply(&raftq.Command{Op: raftq.OpTick})
	} else {
		q.rearm()
	}
	q.unlock()
}

// Touch renews the x-expires lease (a redeclaration).
func (q *Queue) Touch() error {
	q.mu.Lock()
	defer q.unlock()
	if q.stopped {
		return queue.ErrDeleted
	}
	q.apply(&raftq.Command{Op: raftq.OpTouch})
	return nil
}

// Reconfigure makes args the queue's effective arguments (a policy
// changed them): they are parsed as New parses Config.Arguments, an
// invalid one is refused (an error wrapping *raftq.ArgError) and changes
// nothing, and a valid set is applied to the machine as an UpdateConfig
// command, whose effects are carried out before Reconfigure returns (with
// drop-head, a lower x-max-length dead-letters the excess at once). What
// changes for messages already queued is RabbitMQ's rule, described at
// raftq's Machine.updateConfig. A classic queue keeps its priorities
// (x-max-priority) and single active consumer, and has no delivery limit,
// whatever args say.
func (q *Queue) Reconfigure(args wire.Table) error {
	mcfg, dlxOnReject, err := ParseConfig(args)
	if err != nil {
		return fmt.Errorf("queue arguments: %w", err)
	}
	q.mu.Lock()
	defer q.unlock()
	if q.stopped {
		return queue.ErrDeleted
	}
	q.apply(&raftq.Command{Op: raftq.OpUpdateConfig, Config: mcfg})
	q.dlxOnReject = dlxOnReject
	return nil
}

// Enqueue stores m, confirmed (or refused) before it returns. It never
// blocks: the node's memory alarm blocks publishers upstream.
func (q *Queue) Enqueue(_ context.Context, m *queue.Message, done func(error)) error {
	err := q.enqueue(m)
	if done != nil {
		done(err)
	}
	return err
}

func (q *Queue) enqueue(m *queue.Message) error {
	q.mu.Lock()
	defer q.unlock()
	if q.stopped {
		return queue.ErrDeleted
	}
	q.seq++
	cmd := raftq.Command{Op: raftq.OpEnqueue, Size: uint32(len(m.Body)), Publisher: publisher, Seq: q.seq}
	p := &m.Properties
	if p.Flags&wire.FlagPriority != 0 || p.Priority != 0 {
		cmd.Priority, cmd.HasPriority = p.Priority, true
	}
	if p.Expiration != "" {
		if ttl, err := strconv.ParseInt(p.Expiration, 10, 64); err == nil && ttl >= 0 {
			cmd.TTL, cmd.HasTTL = ttl, true
		}
	}
	// Stored before the apply: the machine may deliver it at once.
	q.store(q.index+1, m)
	index := q.index + 1
	var err error
	for _, e := range q.apply(&cmd) {
		if e.Kind == raftq.EffectReject {
			err = queue.ErrRejected
		}
	}
	if err != nil {
		q.forget(index)
		if q.dlxOnReject {
			q.dl.add(m, raftq.ReasonMaxLen, q.m.Clock())
		}
	}
	return err
}

// Consume attaches c; deliveries start at once.
func (q *Queue) Consume(c queue.Consumer, opts queue.ConsumeOptions) error {
	q.mu.Lock()
	defer q.unlock()
	if q.stopped {
		return queue.ErrDeleted
	}
	if _, ok := q.byHandle[c]; ok {
		return fmt.Errorf("local: consumer already attached to queue %s", q.cfg.Name)
	}
	id := q.newConsumerID()
	timeout := q.m.Config().ConsumerTimeout
	cmd := raftq.Command{Op: raftq.OpAttach, Consumer: id, Prefetch: opts.Prefetch, ConsumerPriority: opts.Priority, Exclusive: opts.Exclusive}
	if cmd.Prefetch == 0 || opts.NoAck {
		cmd.Prefetch = defaultCredit
	}
	if t, ok := consumerTimeout(opts.Arguments); ok {
		cmd.Timeout, cmd.HasTimeout = t, true
		timeout = t
	}
	q.consumers[id] = &consumerRef{c: c, noAck: opts.NoAck, timeout: time.Duration(timeout) * time.Millisecond, attach: cmd}
	q.byHandle[c] = id
	for _, e := range q.apply(&cmd) {
		if e.Kind == raftq.EffectConsumerRefused {
			delete(q.consumers, id)
			delete(q.byHandle, c)
			return queue.ErrExclusiveConsumer
		}
	}
	q.attachedEver = true
	return nil
}

func consumerTimeout(args wire.Table) (int64, bool) {
	if v, ok := args["x-consumer-timeout"]; ok {
		if n, isInt := wire.IntValue(v); isInt && n >= 0 {
			return n, true
		}
	}
	return 0, false
}

// Cancel detaches c. Its unsettled deliveries stay settleable by ID.
// Cancelling the last consumer fires OnUnused, once in the queue's life.
func (q *Queue) Cancel(c queue.Consumer) {
	q.mu.Lock()
	defer q.unlock()
	id, ok := q.byHandle[c]
	if !ok || q.stopped {
		return
	}
	// Its pending no-ack settles first: they are not unsettled deliveries.
	if ids := q.noAckSettle[id]; len(ids) > 0 {
		delete(q.noAckSettle, id)
		q.settle(id, ids)
	}
	q.apply(&raftq.Command{Op: raftq.OpDetach, Consumer: id})
	delete(q.byHandle, c)
	delete(q.consumers, id)
	q.maybeUnused()
}

// Resume lets a consumer whose Deliver returned false receive again. Its
// machine credit was held meanwhile (for no-ack consumers, by settling
// nothing); here the held deliveries are settled and dispatch resumes.
func (q *Queue) Resume(c queue.Consumer) {
	q.mu.Lock()
	defer q.unlock()
	id, ok := q.byHandle[c]
	if !ok || q.stopped {
		return
	}
	ref := q.consumers[id]
	if ref == nil || !ref.paused {
		return
	}
	ref.paused = false
	cmd := ref.attach
	q.apply(&cmd)
}

// Get takes one message for basic.get.
func (q *Queue) Get(noAck bool) (queue.Delivery, uint32, bool, error) {
	q.mu.Lock()
	defer q.unlock()
	if q.stopped {
		return queue.Delivery{}, 0, false, queue.ErrDeleted
	}
	for _, e := range q.apply(&raftq.Command{Op: raftq.OpGet, Consumer: q.getter, NoAck: noAck}) {
		if e.Kind != raftq.EffectGetResult {
			continue
		}
		m := q.msgs[e.Index]
		if noAck {
			q.forget(e.Index)
		}
		return queue.Delivery{ID: e.Delivery, Message: m, Redelivered: e.Redelivered}, e.Count, m != nil, nil
	}
	return queue.Delivery{}, 0, false, nil
}

// byHolder turns delivery IDs (the machine's, raftq.Effect.Delivery) into
// message IDs by consumer, in a stable order (the order the first delivery
// of each holder appears in ids). q.mu is held.
func (q *Queue) byHolder(ids []uint64) ([]raftq.ConsumerID, map[raftq.ConsumerID][]uint64) {
	order, groups, _ := q.m.HoldersOf(ids) // one member: unknown is settled
	return order, groups
}

// Settle acknowledges deliveries.
func (q *Queue) Settle(ids []uint64) {
	q.mu.Lock()
	defer q.unlock()
	if q.stopped {
		return
	}
	order, groups := q.byHolder(ids)
	for _, c := range order {
		q.settle(c, groups[c])
	}
	for q.settleNoAck() {
	}
	q.rearm()
}

// Requeue puts deliveries back, ahead of never-delivered messages.
func (q *Queue) Requeue(ids []uint64, cause queue.ReturnCause) {
	q.giveBack(raftq.OpReturn, ids, cause)
}

// Discard dead-letters (or drops) rejected deliveries.
func (q *Queue) Discard(ids []uint64, cause queue.ReturnCause) {
	q.giveBack(raftq.OpDiscard, ids, cause)
}

// giveBack applies op (Return or Discard) to deliveries, grouped by the
// consumer that holds them.
func (q *Queue) giveBack(op raftq.Op, ids []uint64, cause queue.ReturnCause) {
	q.mu.Lock()
	defer q.unlock()
	if q.stopped {
		return
	}
	order, groups := q.byHolder(ids)
	for _, c := range order {
		q.apply(&raftq.Command{Op: op, Consumer: c, IDs: groups[c], Cause: raftq.ReturnCause(cause)})
	}
}

// Purge removes the ready messages.
func (q *Queue) Purge() (uint32, error) {
	q.mu.Lock()
	defer q.unlock()
	if q.stopped {
		return 0, queue.ErrDeleted
	}
	var n uint32
	for _, e := range q.apply(&raftq.Command{Op: raftq.OpPurge}) {
		if e.Kind == raftq.EffectPurged {
			n = e.Count
		}
	}
	q.collect()
	return n, nil
}

// Stats counts the queue's contents.
func (q *Queue) Stats() queue.Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.m.Stats()
	return queue.Stats{Ready: uint32(st.Ready), Unacked: uint32(st.Unacked), Consumers: uint32(st.Consumers), DeadLettered: uint32(st.DeadLettered)}
}

// Delete removes the queue's contents and stops it; consumers get Gone.
func (q *Queue) Delete(ifUnused, ifEmpty bool) (uint32, error) {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return 0, queue.ErrDeleted
	}
	st := q.m.Stats()
	if ifUnused && st.Consumers > 0 {
		q.mu.Unlock()
		return 0, queue.ErrInUse
	}
	if ifEmpty && st.Ready > 0 {
		q.mu.Unlock()
		return 0, queue.ErrNotEmpty
	}
	gone := make([]queue.Consumer, 0, len(q.consumers))
	for _, ref := range q.consumers {
		gone = append(gone, ref.c)
	}
	q.stopLocked()
	q.unlock()
	for _, c := range gone {
		c.Gone()
	}
	return uint32(st.Ready), nil
}

// Close stops the queue without telling its consumers.
func (q *Queue) Close() {
	q.mu.Lock()
	if !q.stopped {
		q.stopLocked()
	}
	q.unlock()
}

func (q *Queue) stopLocked() {
	q.stopped = true
	q.timer.Stop()
	q.cfg.Budget.Release(q.bytes)
	q.bytes = 0
	q.msgs = make(map[uint64]*queue.Message)
	q.consumers = make(map[raftq.ConsumerID]*consumerRef)
	q.byHandle = make(map[queue.Consumer]raftq.ConsumerID)
	q.noAckSettle = make(map[raftq.ConsumerID][]uint64)
	q.dl.stop()
}
