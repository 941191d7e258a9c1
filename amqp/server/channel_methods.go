package server

import (
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/raftq/queue"
)

// ---- channel.flow --------------------------------------------------------

// channelFlow carries out channel.flow from the client. active=false holds
// back deliveries to the channel's consumers: a delivery a queue makes
// meanwhile is kept in its consumer's held list, and the consumer is
// paused, so that queues deliver nothing more to it; active=true sends
// what was held and resumes them. Deliveries already queued for the socket
// before flow-ok still arrive.
//
// RabbitMQ 4.3 refuses active=false with 540 NOT_IMPLEMENTED
// "active=false"; Warren implements the 0-9-1 semantics instead.
func (ch *channel) channelFlow(m *wire.ChannelFlow) error {
	ch.mu.Lock()
	ch.flowOff = !m.Active
	ch.mu.Unlock()
	ch.reply(&wire.ChannelFlowOk{Active: m.Active})
	if m.Active {
		ch.unblock()
	}
	return nil
}

// unblock sends deliveries held back by channel.flow or the global
// prefetch while the channel no longer blocks them, and resumes the
// consumers that have nothing held any more. Called whenever a block may
// have lifted (flow on, acks, qos changed).
func (ch *channel) unblock() {
	var resume, viaWriter []*consumer
	ch.mu.Lock()
	for _, k := range ch.consumers {
		if len(k.held) == 0 {
			continue
		}
		full := false
		n := 0
		for n < len(k.held) && !ch.blockedLocked(k) {
			if !ch.deliverLocked(k, k.held[n]) {
				full = true
			}
			k.held[n] = queue.Delivery{}
			n++
		}
		k.held = k.held[n:]
		if len(k.held) == 0 {
			k.held = nil
		}
		if n == 0 || len(k.held) > 0 || k.q == nil {
			continue
		}
		if full {
			viaWriter = append(viaWriter, k)
		} else {
			resume = append(resume, k)
		}
	}
	ch.mu.Unlock()
	// Resumed outside ch.mu: a queue may deliver from within Resume.
	for _, k := range viaWriter {
		ch.c.out.pause(k)
	}
	for _, k := range resume {
		k.resume()
	}
}

// ---- transactions --------------------------------------------------------

// Transaction buffer bounds. RabbitMQ buffers a transaction's publishes
// without limit; Warren refuses the publish that would take the buffer
// past txMaxMessages messages or past max(txMaxBytes, the configured
// maximum message size) bytes of bodies, with 406 PRECONDITION_FAILED,
// which closes the channel and drops the transaction.
const (
	txMaxMessages = 65536
	txMaxBytes    = 64 << 20
)

type txKind uint8

const (
	txAck txKind = iota
	txReject
	txNack
)

// txBuffer is what a transactional channel has done since its last
// commit or rollback.
type txBuffer struct {
	pubs  []txPublish
	bytes uint64
	acks  []txSettlement
}

type txPublish struct {
	pub     *wire.BasicPublish
	msg     *queue.Message
	qs      []*broker.Queue // where it was routed at publish time
	replies replyRoute      // direct reply-to names it was routed to (replyto.go)
}

type txSettlement struct {
	kind    txKind
	requeue bool
	entries []unackedEntry // taken off the unacked list
}

func (b *txBuffer) reset() { *b = txBuffer{} }

func (b *txBuffer) ackedEntries() []unackedEntry {
	var out []unackedEntry
	for _, s := range b.acks {
		out = append(out, s.entries...)
	}
	return out
}

func (ch *channel) txSelect() error {
	if ch.confirmMode {
		return wire.Errorf(wire.PreconditionFailed, "cannot switch from confirm to tx mode")
	}
	ch.txMode = true
	ch.mu.Lock()
	ch.shown.transactional = true
	ch.mu.Unlock()
	ch.reply(&wire.TxSelectOk{})
	return nil
}

// txBufferPublish keeps a routed publish until commit. qs is copied.
func (ch *channel) txBufferPublish(pub *wire.BasicPublish, msg *queue.Message, qs []*broker.Queue, replies replyRoute) error {
	limit := max(uint64(txMaxBytes), ch.c.s.cfg.MaxMessageSize)
	size := uint64(len(msg.Body))
	if len(ch.tx.pubs) >= txMaxMessages || ch.tx.bytes+size > limit {
		return wire.Errorf(wire.PreconditionFailed,
			"transaction too large: at most %d messages and %d bytes may be published per transaction", txMaxMessages, limit)
	}
	ch.tx.bytes += size
	ch.tx.pubs = append(ch.tx.pubs, txPublish{
		pub:     pub,
		msg:     msg,
		qs:      append([]*broker.Queue(nil), qs...),
		replies: replies,
	})
	return nil
}

// txSettle takes the deliveries an ack, nack or reject names off the
// unacked list at once (so the tags are checked now, as RabbitMQ does) and
// settles them at commit; rollback puts them back unacknowledged.
func (ch *channel) txSettle(tag uint64, multiple bool, kind txKind, requeue bool) error {
	ch.mu.Lock()
	entries, ok := ch.unacked.takeEntries(tag, multiple, nil)
	for _, e := range entries {
		if e.counted {
			ch.txCounted++
		}
	}
	ch.mu.Unlock()
	if !ok {
		return wire.Errorf(wire.PreconditionFailed, "unknown delivery tag %d", tag)
	}
	ch.tx.acks = append(ch.tx.acks, txSettlement{kind: kind, requeue: requeue, entries: entries})
	return nil
}

// txCommit carries out the buffered publishes, waits until every queue
// has stored them, settles the buffered acks, and answers commit-ok.
func (ch *channel) txCommit() error {
	if !ch.txMode {
		return wire.Errorf(wire.PreconditionFailed, "channel is not transactional")
	}
	var wg sync.WaitGroup
	for i := range ch.tx.pubs {
		p := &ch.tx.pubs[i]
		if len(p.qs) == 0 {
			ch.deliverRouted(p.pub, p.msg, nil, p.replies)
			continue
		}
		p.replies.deliver(ch.c.s, p.msg)
		for _, q := range p.qs {
			wg.Add(1)
			var once atomic.Bool
			done := func(error) {
				if once.CompareAndSwap(false, true) {
					wg.Done()
				}
			}
			if err := q.Engine().Enqueue(ch.ctx, p.msg, done); err != nil {
				ch.c.log.Debug("enqueue failed", "queue", q.Name(), "err", err)
				done(err)
			}
		}
	}
	wg.Wait()
	ch.mu.Lock()
	ch.txCounted = 0
	ch.mu.Unlock()
	for _, s := range ch.tx.acks {
		for _, e := range s.entries {
			ch.settle.add(e.q, e.id)
		}
		cause := queue.ReturnNack
		if s.kind == txReject {
			cause = queue.ReturnReject
		}
		switch {
		case s.kind == txAck:
			ch.ackSettled()
		case s.requeue:
			ch.settle.requeue(cause)
		default:
			ch.settle.discard(cause)
		}
	}
	ch.tx.reset()
	ch.reply(&wire.TxCommitOk{})
	ch.unblock()
	return nil
}

// txRollback drops the buffered publishes and undoes the buffered acks:
// those deliveries are unacknowledged again, as in RabbitMQ.
func (ch *channel) txRollback() error {
	if !ch.txMode {
		return wire.Errorf(wire.PreconditionFailed, "channel is not transactional")
	}
	ch.mu.Lock()
	ch.unacked.restore(ch.tx.ackedEntries())
	ch.txCounted = 0
	ch.mu.Unlock()
	ch.tx.reset()
	ch.reply(&wire.TxRollbackOk{})
	return nil
}

// ---- direct reply-to -----------------------------------------------------

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

// declareReplyTo answers queue.declare, passive or not, for direct
// reply-to names as RabbitMQ 4.3 does: the pseudo-queue itself always
// exists, and a rewritten name exists while its reply consumer lives
// (0 messages, 1 consumer; 404 once gone), which is how a responder can
// check that the requester is still there.
func (ch *channel) declareReplyTo(m *wire.QueueDeclare) (bool, error) {
	switch {
	case m.Queue == replyToQueue:
	case isReplyName(m.Queue):
		if !ch.c.s.replyLives(m.Queue) {
			return true, wire.Errorf(wire.NotFound, "no queue '%s' in vhost '%s'", m.Queue, ch.c.vhost.Name())
		}
	default:
		return false, nil
	}
	if !m.NoWait {
		ch.reply(&wire.QueueDeclareOk{Queue: m.Queue, ConsumerCount: 1})
	}
	return true, nil
}
