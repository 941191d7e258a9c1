package server

import (
	"context"
	"errors"
	"sync"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq/queue"
)

// channel is one AMQP channel. The connection's reader goroutine runs all
// of its methods; queue engines reach it only through the consumer's
// methods (Deliver, Gone, TimedOut), which take mu, and TimedOut may close
// the channel, which takes op.
//
// The channel itself holds its life (closing, release) and its consuming
// side: the consumers, delivery tags and unacknowledged deliveries, which
// queue goroutines reach under mu. The reader's other concerns are parts
// that own their fields and point back to it: pub (publish.go) assembles,
// routes and confirms publishes; tx (tx.go) is the tx class; topo
// (topology.go) the exchange and queue methods.
type channel struct {
	c  *conn
	id uint16

	// op serialises the reader's handling of the channel's frames with a
	// close that a queue causes (a consumer timeout): whoever holds it
	// owns the fields below, up to mu, and those of pub, tx and topo
	// (pub's confirms excepted). Lock order: op, then mu.
	op sync.Mutex

	// Owned by the reader goroutine, under op.
	closing  bool // we sent channel.close and wait for close-ok
	released bool // consumers cancelled and deliveries requeued: the channel is done
	pub      publisher
	tx       transaction
	topo     topology
	replyTo  string // the rewritten amq.rabbitmq.reply-to of the reply consumer
	ctx      context.Context
	cancel   context.CancelFunc
	// cancelled are consumers cancelled with basic.cancel whose queues
	// release consumers (queue.Releaser): the channel's close releases
	// them too, as RabbitMQ's channel going down returns what its
	// cancelled consumers still hold. At most maxCancelled, newest kept.
	cancelled []*consumer

	// mu guards delivery tags, unacked deliveries and the consumer table,
	// which deliveries from queue goroutines touch.
	mu        sync.Mutex
	nextTag   uint64
	unacked   unackedList
	consumers map[string]*consumer
	// flowOff (channel.flow active=false) and globalPrefetch (basic.qos
	// global) hold back deliveries; txCounted is the consumer deliveries
	// whose acks a transaction holds, still counted against the prefetch.
	// prefetch (basic.qos) is for the channel's next consumers.
	flowOff        bool
	globalPrefetch uint32
	prefetch       uint32
	txCounted      int
	replyConsumer  *consumer // the direct reply-to consumer, if any
	// shown copies the reader's settings that listings show
	// (Server.Connections), which cannot take op.
	shown shownSettings

	settle settleBatch // scratch for grouping settlements by queue
}

func newChannel(c *conn, id uint16) *channel {
	ctx, cancel := context.WithCancel(context.Background())
	ch := &channel{
		c:         c,
		id:        id,
		consumers: make(map[string]*consumer),
		ctx:       ctx,
		cancel:    cancel,
	}
	ch.pub.init(ch)
	ch.tx.ch = ch
	ch.topo.ch = ch
	return ch
}

// handleFrame processes one frame for this channel. Soft errors close the
// channel here; hard ones are returned to close the connection.
func (ch *channel) handleFrame(f wire.Frame) error {
	ch.op.Lock()
	defer ch.op.Unlock()
	if ch.closing {
		return ch.whileClosing(f)
	}
	var err error
	switch f.Type {
	case wire.FrameMethod:
		if ch.pub.content.active() {
			return ch.pub.content.unexpected()
		}
		var m wire.Method
		if m, err = wire.DecodeMethod(f.Payload); err != nil {
			return err
		}
		err = withMethodErr(ch.handleMethod(m), m)
	case wire.FrameHeader:
		err = ch.pub.contentHeader(f.Payload)
	case wire.FrameBody:
		err = ch.pub.contentBody(f.Payload)
	default:
		return wire.Errorf(wire.FrameError, "unexpected frame type %d", f.Type)
	}
	if err == nil {
		return nil
	}
	var ae *wire.Error
	if !errors.As(err, &ae) {
		ch.c.log.Error("channel method failed", "channel", ch.id, "err", err)
		return wire.Errorf(wire.InternalError, "%v", err)
	}
	if ae.Hard() {
		return ae
	}
	ch.softClose(ae)
	return nil
}

func withMethodErr(err error, m wire.Method) error {
	var ae *wire.Error
	if errors.As(err, &ae) {
		return withMethod(ae, m)
	}
	return err
}

// softClose closes the channel for a channel-level error: channel.close is
// sent, the channel's consumers and deliveries are released at once, and
// everything but close and close-ok is ignored until the client answers.
func (ch *channel) softClose(e *wire.Error) {
	ch.c.log.Info("closing channel", "channel", ch.id, "code", e.Code, "text", e.Text, "class", e.ClassID, "method", e.MethodID)
	ch.closing = true
	ch.pub.content.reset()
	ch.release()
	ch.c.out.push(outItem{channel: ch.id, method: e.ChannelClose()})
}

// closeFromQueue closes the channel for an error that arose outside the
// reader, as softClose does, unless it is closing or closed already.
func (ch *channel) closeFromQueue(e *wire.Error) {
	ch.op.Lock()
	defer ch.op.Unlock()
	if ch.closing || ch.released {
		return
	}
	ch.softClose(e)
}

func (ch *channel) whileClosing(f wire.Frame) error {
	if f.Type != wire.FrameMethod {
		return nil
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil {
		return nil // the channel is going away; its garbage does not matter
	}
	switch m.(type) {
	case *wire.ChannelCloseOk:
		ch.c.removeChannel(ch.id)
	case *wire.ChannelClose:
		ch.c.out.push(outItem{channel: ch.id, method: &wire.ChannelCloseOk{}})
		ch.c.removeChannel(ch.id)
	}
	return nil
}

// release cancels the channel's consumers and requeues what it held
// unacknowledged, as when a channel or connection closes.
func (ch *channel) release() {
	ch.released = true
	ch.cancel()
	ch.mu.Lock()
	consumers := make([]*consumer, 0, len(ch.consumers))
	for tag, k := range ch.consumers {
		consumers = append(consumers, k)
		delete(ch.consumers, tag)
	}
	ch.mu.Unlock()
	for _, k := range consumers {
		k.release()
	}
	for _, k := range ch.cancelled {
		k.release()
	}
	ch.cancelled = nil
	ch.mu.Lock()
	ch.unacked.takeAll(&ch.settle)
	// Acks held by an open transaction are undone: those deliveries are
	// requeued with the rest.
	for _, e := range ch.tx.buf.ackedEntries() {
		ch.settle.add(e.q, e.id)
	}
	ch.txCounted = 0
	ch.mu.Unlock()
	ch.tx.buf.reset()
	if len(ch.settle.groups) > 0 {
		ch.c.log.Debug("channel released", "channel", ch.id, "consumers", len(consumers), "requeued", ch.settle.count())
	}
	ch.settle.requeue(queue.ReturnConsumerGone)
	ch.pub.confirms.reset()
}

func (ch *channel) reply(m wire.Method) {
	ch.c.out.push(outItem{channel: ch.id, method: m})
}

// handleMethod runs one method. It returns *amqp.Error for refusals.
func (ch *channel) handleMethod(m wire.Method) error {
	switch m := m.(type) {
	case *wire.ChannelOpen:
		return wire.Errorf(wire.ChannelError, "second 'channel.open' seen")
	case *wire.ChannelClose:
		ch.release()
		ch.reply(&wire.ChannelCloseOk{})
		ch.c.removeChannel(ch.id)
		return nil
	case *wire.ChannelCloseOk:
		return nil
	case *wire.ChannelFlow:
		return ch.channelFlow(m)

	case *wire.ExchangeDeclare:
		return ch.topo.exchangeDeclare(m)
	case *wire.ExchangeDelete:
		return ch.topo.exchangeDelete(m)
	case *wire.ExchangeBind:
		return ch.topo.exchangeBind(m)
	case *wire.ExchangeUnbind:
		return ch.topo.exchangeUnbind(m)

	case *wire.QueueDeclare:
		return ch.topo.queueDeclare(m)
	case *wire.QueueBind:
		return ch.topo.queueBind(m)
	case *wire.QueueUnbind:
		return ch.topo.queueUnbind(m)
	case *wire.QueuePurge:
		return ch.topo.queuePurge(m)
	case *wire.QueueDelete:
		return ch.topo.queueDelete(m)

	case *wire.BasicQos:
		return ch.basicQos(m)
	case *wire.BasicConsume:
		return ch.basicConsume(m)
	case *wire.BasicCancel:
		return ch.basicCancel(m)
	case *wire.BasicPublish:
		return ch.pub.basicPublish(m)
	case *wire.BasicGet:
		return ch.basicGet(m)
	case *wire.BasicAck:
		return ch.basicAck(m)
	case *wire.BasicReject:
		return ch.basicReject(m)
	case *wire.BasicNack:
		return ch.basicNack(m)
	case *wire.BasicRecover:
		if err := ch.recover(m.Requeue); err != nil {
			return err
		}
		ch.reply(&wire.BasicRecoverOk{})
		return nil
	case *wire.BasicRecoverAsync:
		return ch.recover(m.Requeue)

	case *wire.ConfirmSelect:
		return ch.pub.confirmSelect(m)
	case *wire.TxSelect:
		return ch.tx.txSelect()
	case *wire.TxCommit:
		return ch.tx.commit()
	case *wire.TxRollback:
		return ch.tx.rollback()
	}
	return wire.Errorf(wire.CommandInvalid, "unimplemented method")
}
