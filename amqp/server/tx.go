package server

import (
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/raftq/queue"
)

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

// transaction is a channel's tx class, run by the reader under
// channel.op: whether the channel is transactional, and what it has done
// since its last commit or rollback. Its settlements take deliveries off
// the channel's unacked list (under channel.mu) at once and settle them at
// commit.
type transaction struct {
	ch  *channel
	on  bool // tx.select seen
	buf txBuffer
}

func (t *transaction) txSelect() error {
	ch := t.ch
	if ch.pub.confirmMode {
		return wire.Errorf(wire.PreconditionFailed, "cannot switch from confirm to tx mode")
	}
	t.on = true
	ch.mu.Lock()
	ch.shown.transactional = true
	ch.mu.Unlock()
	ch.reply(&wire.TxSelectOk{})
	return nil
}

// bufferPublish keeps a routed publish until commit. qs is copied.
func (t *transaction) bufferPublish(pub *wire.BasicPublish, msg *queue.Message, qs []*broker.Queue, replies replyRoute) error {
	limit := max(uint64(txMaxBytes), t.ch.c.s.cfg.MaxMessageSize)
	size := uint64(len(msg.Body))
	if len(t.buf.pubs) >= txMaxMessages || t.buf.bytes+size > limit {
		return wire.Errorf(wire.PreconditionFailed,
			"transaction too large: at most %d messages and %d bytes may be published per transaction", txMaxMessages, limit)
	}
	t.buf.bytes += size
	t.buf.pubs = append(t.buf.pubs, txPublish{
		pub:     pub,
		msg:     msg,
		qs:      append([]*broker.Queue(nil), qs...),
		replies: replies,
	})
	return nil
}

// settle takes the deliveries an ack, nack or reject names off the
// unacked list at once (so the tags are checked now, as RabbitMQ does) and
// settles them at commit; rollback puts them back unacknowledged.
func (t *transaction) settle(tag uint64, multiple bool, kind txKind, requeue bool) error {
	ch := t.ch
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
	t.buf.acks = append(t.buf.acks, txSettlement{kind: kind, requeue: requeue, entries: entries})
	return nil
}

// commit carries out the buffered publishes, waits until every queue
// has stored them, settles the buffered acks, and answers commit-ok.
func (t *transaction) commit() error {
	ch := t.ch
	if !t.on {
		return wire.Errorf(wire.PreconditionFailed, "channel is not transactional")
	}
	var wg sync.WaitGroup
	for i := range t.buf.pubs {
		p := &t.buf.pubs[i]
		if len(p.qs) == 0 {
			ch.pub.deliverRouted(p.pub, p.msg, nil, p.replies)
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
	for _, s := range t.buf.acks {
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
	t.buf.reset()
	ch.reply(&wire.TxCommitOk{})
	ch.unblock()
	return nil
}

// rollback drops the buffered publishes and undoes the buffered acks:
// those deliveries are unacknowledged again, as in RabbitMQ.
func (t *transaction) rollback() error {
	ch := t.ch
	if !t.on {
		return wire.Errorf(wire.PreconditionFailed, "channel is not transactional")
	}
	ch.mu.Lock()
	ch.unacked.restore(t.buf.ackedEntries())
	ch.txCounted = 0
	ch.mu.Unlock()
	t.buf.reset()
	ch.reply(&wire.TxRollbackOk{})
	return nil
}
