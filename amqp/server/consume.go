package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/raftq/queue"
)

// consumer is one basic.consume: the queue.Consumer a queue delivers to.
type consumer struct {
	ch    *channel
	tag   string
	q     *broker.Queue
	noAck bool

	// started turns true once consume-ok is queued: deliveries that the
	// queue makes before then wait in early, so that the client always
	// sees consume-ok first. Both are guarded by ch.mu.
	started bool
	early   []queue.Delivery
	paused  atomic.Bool
	// held is deliveries accepted while the channel holds them back
	// (channel.flow off, global prefetch reached); guarded by ch.mu and
	// sent by channel.unblock. For a queue consumer it holds at most a
	// few: Deliver pauses the consumer as it holds one.
	held []queue.Delivery
	// token names a direct reply-to consumer (q is nil) in the server's
	// registry.
	token string
	// opts are the consumer's basic.consume settings, for listings.
	opts queue.ConsumeOptions
}

// blockedLocked reports whether deliveries to k must wait: the channel's
// flow is off, or k acknowledges and the channel's global prefetch is
// used up. ch.mu is held.
func (ch *channel) blockedLocked(k *consumer) bool {
	if ch.flowOff {
		return true
	}
	return !k.noAck && ch.globalPrefetch > 0 && uint32(ch.unacked.counted+ch.txCounted) >= ch.globalPrefetch
}

// cancel detaches k from its queue, or from the reply-to registry.
func (k *consumer) cancel() {
	if k.q == nil {
		k.ch.c.s.replies.remove(k)
		return
	}
	k.q.Engine().Cancel(k)
}

// release is cancel for a closing channel: a queue that can (a quorum
// queue) returns everything k still holds once its acknowledgements are
// in (queue.Releaser).
func (k *consumer) release() {
	if k.q == nil {
		k.ch.c.s.replies.remove(k)
		return
	}
	if r, ok := k.q.Engine().(queue.Releaser); ok {
		r.Release(k)
		return
	}
	k.q.Engine().Cancel(k)
}

// maxCancelled bounds the cancelled consumers a channel keeps for its
// close to release (channel.cancelled).
const maxCancelled = 256

// keepCancelled remembers k, just cancelled, for the channel's close to
// release, if its queue releases consumers: a cancelled consumer of a
// quorum queue keeps what it holds until then.
func (ch *channel) keepCancelled(k *consumer) {
	if k.q == nil {
		return
	}
	if _, ok := k.q.Engine().(queue.Releaser); !ok {
		return
	}
	if len(ch.cancelled) >= maxCancelled {
		ch.cancelled = append(ch.cancelled[:0], ch.cancelled[1:]...)
	}
	ch.cancelled = append(ch.cancelled, k)
}

// earlyLimit bounds deliveries held back before consume-ok.
const earlyLimit = 256

// Deliver implements queue.Consumer. It runs on the queue's goroutine
// with the queue locked: it only queues frames.
func (k *consumer) Deliver(d queue.Delivery) bool {
	ch := k.ch
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !k.started {
		k.early = append(k.early, d)
		if len(k.early) >= earlyLimit {
			k.paused.Store(true)
			return false
		}
		return true
	}
	if k.q == nil && ch.consumers[k.tag] != k {
		return true // a reply to a cancelled reply consumer: dropped
	}
	if len(k.held) > 0 || ch.blockedLocked(k) {
		if k.q == nil {
			// A reply consumer cannot be paused: replies beyond a bound
			// are dropped while flow is off.
			if len(k.held) < earlyLimit {
				k.held = append(k.held, d)
			}
			return true
		}
		k.held = append(k.held, d)
		k.paused.Store(true)
		return false
	}
	if ch.deliverLocked(k, d) {
		return true
	}
	k.paused.Store(true)
	ch.c.out.pause(k)
	return false
}

// Gone implements queue.Consumer: the queue was deleted.
func (k *consumer) Gone() {
	ch := k.ch
	ch.mu.Lock()
	current := ch.consumers[k.tag] == k
	if current {
		delete(ch.consumers, k.tag)
	}
	ch.mu.Unlock()
	if current && ch.c.caps.consumerCancelNotify {
		ch.c.out.push(outItem{channel: ch.id, method: &wire.BasicCancel{ConsumerTag: k.tag, NoWait: true}})
	}
}

// TimedOut implements queue.Consumer: a delivery stayed unacknowledged
// past the consumer timeout and the queue cancelled the consumer. As in
// RabbitMQ 4.3 (rabbit_channel handle_queue_actions, {released, ...,
// timeout}), a client that announced consumer_cancel_notify gets
// basic.cancel and keeps its channel; otherwise the channel is closed with
// 406. RabbitMQ 4.3.5 prints "-1" as the timeout for quorum queues; Warren
// prints the timeout that applied.
func (k *consumer) TimedOut(timeout time.Duration) {
	ch := k.ch
	ch.mu.Lock()
	current := ch.consumers[k.tag] == k
	notify := current && ch.c.caps.consumerCancelNotify
	if notify {
		delete(ch.consumers, k.tag)
	}
	ch.mu.Unlock()
	if notify {
		ch.c.log.Warn("consumer timed out; cancelling it", "channel", ch.id, "consumer", k.tag, "queue", k.q.Name(), "timeout", timeout)
		ch.c.out.push(outItem{channel: ch.id, method: &wire.BasicCancel{ConsumerTag: k.tag, NoWait: true}})
		return
	}
	ch.closeFromQueue(wire.Errorf(wire.PreconditionFailed,
		"delivery acknowledgement on channel %d timed out. Timeout value used: %d ms. "+
			"This timeout value can be configured, see consumers doc guide to learn more",
		ch.id, timeout.Milliseconds()))
}

func (k *consumer) resume() {
	if k.q == nil {
		return
	}
	if k.paused.CompareAndSwap(true, false) {
		k.q.Engine().Resume(k)
	}
}

// deliverLocked gives d the channel's next delivery tag and queues the
// basic.deliver. ch.mu is held, so tags reach the wire in order.
func (ch *channel) deliverLocked(k *consumer, d queue.Delivery) bool {
	ch.nextTag++
	if !k.noAck {
		ch.unacked.add(ch.nextTag, k.q, d.ID, true)
		ch.c.stats.add(cDeliveredManualAck, 1)
	} else {
		ch.c.stats.add(cDeliveredAutoAck, 1)
	}
	if d.Redelivered {
		ch.c.stats.add(cRedelivered, 1)
	}
	return ch.c.out.push(outItem{
		channel: ch.id,
		method: &wire.BasicDeliver{
			ConsumerTag: k.tag,
			DeliveryTag: ch.nextTag,
			Redelivered: d.Redelivered,
			Exchange:    d.Message.Exchange,
			RoutingKey:  d.Message.RoutingKey,
		},
		props: &d.Message.Properties,
		body:  d.Message.Body,
	})
}

func generateConsumerTag() string {
	var id [16]byte
	rand.Read(id[:])
	return "amq.ctag-" + base64.RawURLEncoding.EncodeToString(id[:])
}

func (ch *channel) basicQos(m *wire.BasicQos) error {
	if m.PrefetchSize != 0 {
		return wire.Errorf(wire.NotImplemented, "prefetch_size!=0 (%d)", m.PrefetchSize)
	}
	if m.Global && ch.c.s.cfg.PermitGlobalQos {
		// As RabbitMQ's limiter: one limit shared by the channel's
		// acknowledging consumers, existing and future, counting their
		// unacknowledged deliveries (basic.get's are not counted). Only
		// classic queues support it (basicConsume).
		ch.mu.Lock()
		ch.globalPrefetch = uint32(m.PrefetchCount)
		ch.mu.Unlock()
		ch.reply(&wire.BasicQosOk{})
		ch.unblock()
		return nil
	}
	// (A global one too, unless permitted: RabbitMQ 4.3's channel takes
	// basic.qos global=true as global=false while its deprecated feature
	// global_qos is denied, the default.)
	// Prefetch applies to consumers created after it, per consumer, as
	// RabbitMQ's per_consumer_qos does.
	ch.mu.Lock()
	ch.prefetch = uint32(m.PrefetchCount)
	ch.mu.Unlock()
	ch.reply(&wire.BasicQosOk{})
	return nil
}

func (ch *channel) basicConsume(m *wire.BasicConsume) error {
	// A reused tag is refused before the queue is looked at, as in
	// RabbitMQ.
	tag := m.ConsumerTag
	if tag == "" {
		tag = generateConsumerTag()
	}
	ch.mu.Lock()
	_, taken := ch.consumers[tag]
	ch.mu.Unlock()
	if taken {
		return wire.Errorf(wire.NotAllowed, "attempt to reuse consumer tag '%s'", tag)
	}
	if m.Queue == replyToQueue {
		return ch.consumeReplyTo(tag, m)
	}
	name, err := ch.topo.queueName(m.Queue)
	if err != nil {
		return err
	}
	q, err := ch.c.vhost.LookupQueue(ch.c.user, ch.c.owner, name, broker.Read)
	if err != nil {
		return err
	}
	ch.mu.Lock()
	global, prefetch := ch.globalPrefetch > 0, ch.prefetch
	ch.mu.Unlock()
	if global && q.Type() != broker.QueueTypeClassic {
		// rabbit_quorum_queue:consume refuses an active limiter
		// (global_qos_not_supported_for_queue_type); rabbit_channel
		// answers 540.
		return wire.Errorf(wire.NotImplemented, "queue '%s' in vhost '%s' does not support global qos", name, ch.c.vhost.Name())
	}
	priority, err := consumerPriority(m.Arguments)
	if err != nil {
		return err
	}

	opts := queue.ConsumeOptions{
		Tag:       tag,
		NoAck:     m.NoAck,
		Exclusive: m.Exclusive,
		Prefetch:  prefetch,
		Priority:  priority,
		Arguments: m.Arguments,
	}
	k := &consumer{ch: ch, tag: tag, q: q, noAck: m.NoAck, opts: opts}
	if err := q.Engine().Consume(k, opts); err != nil {
		if err == queue.ErrExclusiveConsumer {
			return wire.Errorf(wire.AccessRefused, "queue '%s' in vhost '%s' in exclusive use", name, ch.c.vhost.Name())
		}
		return ch.queueFailed("basic.consume", "consuming from", q, err)
	}

	ch.mu.Lock()
	ch.consumers[tag] = k
	if !m.NoWait {
		ch.reply(&wire.BasicConsumeOk{ConsumerTag: tag})
	}
	k.started = true
	for _, d := range k.early {
		if len(k.held) > 0 || ch.blockedLocked(k) {
			k.held = append(k.held, d)
			continue
		}
		ch.deliverLocked(k, d)
	}
	k.early = nil
	ch.mu.Unlock()
	// Held-back deliveries may have paused the consumer; the writer
	// resumes it once they are on the wire.
	if k.paused.Load() {
		ch.c.out.pause(k)
	}
	return nil
}

func consumerPriority(args wire.Table) (int32, error) {
	v, ok := args["x-priority"]
	if !ok {
		return 0, nil
	}
	if n, ok := wire.IntValue(v); ok && n >= -1<<31 && n < 1<<31 {
		return int32(n), nil
	}
	return 0, wire.Errorf(wire.PreconditionFailed, "invalid arg 'x-priority' for consumer: %v", v)
}

func (ch *channel) basicCancel(m *wire.BasicCancel) error {
	ch.mu.Lock()
	k := ch.consumers[m.ConsumerTag]
	delete(ch.consumers, m.ConsumerTag)
	ch.mu.Unlock()
	if k != nil {
		k.cancel()
		ch.mu.Lock()
		if ch.replyConsumer == k {
			ch.replyConsumer, ch.replyTo = nil, ""
		}
		ch.mu.Unlock()
		ch.keepCancelled(k)
	}
	if !m.NoWait {
		ch.reply(&wire.BasicCancelOk{ConsumerTag: m.ConsumerTag})
	}
	return nil
}

func (ch *channel) basicGet(m *wire.BasicGet) error {
	name, err := ch.topo.queueName(m.Queue)
	if err != nil {
		return err
	}
	q, err := ch.c.vhost.LookupQueue(ch.c.user, ch.c.owner, name, broker.Read)
	if err != nil {
		return err
	}
	d, remaining, ok, err := q.Engine().Get(m.NoAck)
	if errors.Is(err, queue.ErrGetUnsupported) {
		// rabbit_channel's unsupported_single_active_consumer_error: the
		// type is printed with ~p, a binary.
		return wire.Errorf(wire.ResourceLocked, "cannot obtain access to locked queue '%s' in vhost '%s'. basic.get operations are not supported by <<\"%s\">> queues with single active consumer", name, ch.c.vhost.Name(), q.Type())
	}
	if err != nil {
		return ch.queueFailed("basic.get", "getting from", q, err)
	}
	if !ok {
		ch.c.stats.add(cGetEmpty, 1)
		ch.reply(&wire.BasicGetEmpty{})
		return nil
	}
	ch.mu.Lock()
	ch.nextTag++
	if !m.NoAck {
		ch.unacked.add(ch.nextTag, q, d.ID, false)
		ch.c.stats.add(cGetManualAck, 1)
	} else {
		ch.c.stats.add(cGetAutoAck, 1)
	}
	if d.Redelivered {
		ch.c.stats.add(cRedelivered, 1)
	}
	ch.c.out.push(outItem{
		channel: ch.id,
		method: &wire.BasicGetOk{
			DeliveryTag:  ch.nextTag,
			Redelivered:  d.Redelivered,
			Exchange:     d.Message.Exchange,
			RoutingKey:   d.Message.RoutingKey,
			MessageCount: remaining,
		},
		props: &d.Message.Properties,
		body:  d.Message.Body,
	})
	ch.mu.Unlock()
	return nil
}

// queueFailed answers a basic.consume or basic.get whose queue failed
// (what says the operation, in RabbitMQ's words): 404 if the queue went
// away meanwhile, else 541 INTERNAL_ERROR, which closes the connection,
// as rabbit_quorum_queue's consume_error does for a queue without a
// leader in time ("timed out consuming from quorum queue ..."). A 404
// would tell the application that a queue which exists does not.
func (ch *channel) queueFailed(method, what string, q *broker.Queue, err error) error {
	name := q.Name()
	if errors.Is(err, queue.ErrDeleted) {
		return wire.Errorf(wire.NotFound, "no queue '%s' in vhost '%s'", name, ch.c.vhost.Name())
	}
	if err := broker.NodeDown(err, name, ch.c.vhost.Name()); err != nil {
		return err
	}
	ch.c.log.Warn(method+" failed", "channel", ch.id, "queue", name, "err", err)
	if errors.Is(err, context.DeadlineExceeded) {
		return wire.Errorf(wire.InternalError, "timed out %s %s queue '%s' in vhost '%s'", what, q.Type(), name, ch.c.vhost.Name())
	}
	return wire.Errorf(wire.InternalError, "failed %s %s queue '%s' in vhost '%s': %v", what, q.Type(), name, ch.c.vhost.Name(), err)
}

// settleTags takes the deliveries an ack, nack or reject names, or
// returns 406 for an unknown tag.
func (ch *channel) settleTags(tag uint64, multiple bool) error {
	ch.mu.Lock()
	ok := ch.unacked.take(tag, multiple, &ch.settle)
	ch.mu.Unlock()
	if !ok {
		return wire.Errorf(wire.PreconditionFailed, "unknown delivery tag %d", tag)
	}
	return nil
}

func (ch *channel) basicAck(m *wire.BasicAck) error {
	if ch.tx.on {
		return ch.tx.settle(m.DeliveryTag, m.Multiple, txAck, false)
	}
	if err := ch.settleTags(m.DeliveryTag, m.Multiple); err != nil {
		return err
	}
	ch.ackSettled()
	ch.unblock()
	return nil
}

func (ch *channel) basicReject(m *wire.BasicReject) error {
	return ch.refuse(m.DeliveryTag, false, m.Requeue, txReject, queue.ReturnReject)
}

func (ch *channel) basicNack(m *wire.BasicNack) error {
	return ch.refuse(m.DeliveryTag, m.Multiple, m.Requeue, txNack, queue.ReturnNack)
}

// refuse carries out basic.reject and basic.nack: the deliveries go back
// to their queues, or are discarded (dead-lettered), with the cause that
// tells a quorum queue whether the delivery counts as failed.
func (ch *channel) refuse(tag uint64, multiple, requeue bool, kind txKind, cause queue.ReturnCause) error {
	if ch.tx.on {
		return ch.tx.settle(tag, multiple, kind, requeue)
	}
	if err := ch.settleTags(tag, multiple); err != nil {
		return err
	}
	if requeue {
		ch.settle.requeue(cause)
	} else {
		ch.settle.discard(cause)
	}
	ch.unblock()
	return nil
}

// recover returns every unacknowledged delivery to its queue, to be
// redelivered. requeue=false is refused with 540 as RabbitMQ does
// (rabbit_channel: basic.recover_async requeue=false is
// not_implemented "requeue=false"; basic.recover goes through it).
func (ch *channel) recover(requeue bool) error {
	if !requeue {
		return wire.Errorf(wire.NotImplemented, "requeue=false")
	}
	ch.mu.Lock()
	ch.unacked.takeAll(&ch.settle)
	ch.mu.Unlock()
	ch.settle.requeue(queue.ReturnNack)
	ch.unblock()
	return nil
}

// consumeReplyTo makes the channel's reply consumer: basic.consume from
// amq.rabbitmq.reply-to, which must be no-ack.
func (ch *channel) consumeReplyTo(tag string, m *wire.BasicConsume) error {
	if !m.NoAck {
		return wire.Errorf(wire.PreconditionFailed, "reply consumer cannot acknowledge")
	}
	if ch.replyConsumer != nil {
		return wire.Errorf(wire.PreconditionFailed, "reply consumer already set")
	}
	k := &consumer{ch: ch, tag: tag, noAck: true}
	ch.mu.Lock()
	ch.consumers[tag] = k
	ch.replyConsumer = k
	if !m.NoWait {
		ch.reply(&wire.BasicConsumeOk{ConsumerTag: tag})
	}
	k.started = true
	ch.mu.Unlock()
	ch.c.s.replies.add(k)
	ch.replyTo = replyToQueue + "." + k.token
	return nil
}
