package server

import (
	"context"
	"errors"
	"sync"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/queue"
)

// channel is one AMQP channel. The connection's reader goroutine runs all
// of its methods; queue engines reach it only through the consumer's
// methods (Deliver, Gone, TimedOut), which take mu, and TimedOut may close
// the channel, which takes op.
type channel struct {
	c  *conn
	id uint16

	// op serialises the reader's handling of the channel's frames with a
	// close that a queue causes (a consumer timeout): whoever holds it
	// owns the fields below, up to mu. Lock order: op, then mu.
	op sync.Mutex

	// Owned by the reader goroutine, under op.
	closing     bool // we sent channel.close and wait for close-ok
	released    bool // consumers cancelled and deliveries requeued: the channel is done
	content     contentAssembly
	lastQueue   string // the most recently declared queue, for "" names
	confirmMode bool
	txMode      bool
	tx          txBuffer
	replyTo     string          // the rewritten amq.rabbitmq.reply-to of the reply consumer
	canPublish  map[string]bool // write permission, per exchange
	routeBuf    []*broker.Queue
	keyBuf      []string // a publish's routing keys (CC, BCC)
	ctx         context.Context
	cancel      context.CancelFunc
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

	confirms confirmTracker
	settle   settleBatch // scratch for grouping settlements by queue
}

func newChannel(c *conn, id uint16) *channel {
	ctx, cancel := context.WithCancel(context.Background())
	return &channel{
		c:          c,
		id:         id,
		canPublish: make(map[string]bool),
		consumers:  make(map[string]*consumer),
		ctx:        ctx,
		cancel:     cancel,
	}
}

// handleFrame processes one frame for this channel. Soft errors close the
// channel here; hard ones are returned to close the connection.
func (ch *channel) handleFrame(f amqp.Frame) error {
	ch.op.Lock()
	defer ch.op.Unlock()
	if ch.closing {
		return ch.whileClosing(f)
	}
	var err error
	switch f.Type {
	case amqp.FrameMethod:
		if ch.content.active() {
			return ch.content.unexpected()
		}
		var m amqp.Method
		if m, err = amqp.DecodeMethod(f.Payload); err != nil {
			return err
		}
		err = withMethodErr(ch.handleMethod(m), m)
	case amqp.FrameHeader:
		err = ch.contentHeader(f.Payload)
	case amqp.FrameBody:
		err = ch.contentBody(f.Payload)
	default:
		return amqp.Errorf(amqp.FrameError, "unexpected frame type %d", f.Type)
	}
	if err == nil {
		return nil
	}
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		ch.c.log.Error("channel method failed", "channel", ch.id, "err", err)
		return amqp.Errorf(amqp.InternalError, "%v", err)
	}
	if ae.Hard() {
		return ae
	}
	ch.softClose(ae)
	return nil
}

func withMethodErr(err error, m amqp.Method) error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return withMethod(ae, m)
	}
	return err
}

// softClose closes the channel for a channel-level error: channel.close is
// sent, the channel's consumers and deliveries are released at once, and
// everything but close and close-ok is ignored until the client answers.
func (ch *channel) softClose(e *amqp.Error) {
	ch.c.log.Info("closing channel", "channel", ch.id, "code", e.Code, "text", e.Text, "class", e.ClassID, "method", e.MethodID)
	ch.closing = true
	ch.content.reset()
	ch.release()
	ch.c.out.push(outItem{channel: ch.id, method: e.ChannelClose()})
}

// closeFromQueue closes the channel for an error that arose outside the
// reader, as softClose does, unless it is closing or closed already.
func (ch *channel) closeFromQueue(e *amqp.Error) {
	ch.op.Lock()
	defer ch.op.Unlock()
	if ch.closing || ch.released {
		return
	}
	ch.softClose(e)
}

func (ch *channel) whileClosing(f amqp.Frame) error {
	if f.Type != amqp.FrameMethod {
		return nil
	}
	m, err := amqp.DecodeMethod(f.Payload)
	if err != nil {
		return nil // the channel is going away; its garbage does not matter
	}
	switch m.(type) {
	case *amqp.ChannelCloseOk:
		ch.c.removeChannel(ch.id)
	case *amqp.ChannelClose:
		ch.c.out.push(outItem{channel: ch.id, method: &amqp.ChannelCloseOk{}})
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
	for _, e := range ch.tx.ackedEntries() {
		ch.settle.add(e.q, e.id)
	}
	ch.txCounted = 0
	ch.mu.Unlock()
	ch.tx.reset()
	if len(ch.settle.groups) > 0 {
		ch.c.log.Debug("channel released", "channel", ch.id, "consumers", len(consumers), "requeued", ch.settle.count())
	}
	ch.settle.requeue(queue.ReturnConsumerGone)
	ch.confirms.reset()
}

func (ch *channel) reply(m amqp.Method) {
	ch.c.out.push(outItem{channel: ch.id, method: m})
}

// handleMethod runs one method. It returns *amqp.Error for refusals.
func (ch *channel) handleMethod(m amqp.Method) error {
	switch m := m.(type) {
	case *amqp.ChannelOpen:
		return amqp.Errorf(amqp.ChannelError, "second 'channel.open' seen")
	case *amqp.ChannelClose:
		ch.release()
		ch.reply(&amqp.ChannelCloseOk{})
		ch.c.removeChannel(ch.id)
		return nil
	case *amqp.ChannelCloseOk:
		return nil
	case *amqp.ChannelFlow:
		return ch.channelFlow(m)

	case *amqp.ExchangeDeclare:
		return ch.exchangeDeclare(m)
	case *amqp.ExchangeDelete:
		return ch.exchangeDelete(m)
	case *amqp.ExchangeBind:
		return ch.exchangeBind(m)
	case *amqp.ExchangeUnbind:
		return ch.exchangeUnbind(m)

	case *amqp.QueueDeclare:
		return ch.queueDeclare(m)
	case *amqp.QueueBind:
		return ch.queueBind(m)
	case *amqp.QueueUnbind:
		return ch.queueUnbind(m)
	case *amqp.QueuePurge:
		return ch.queuePurge(m)
	case *amqp.QueueDelete:
		return ch.queueDelete(m)

	case *amqp.BasicQos:
		return ch.basicQos(m)
	case *amqp.BasicConsume:
		return ch.basicConsume(m)
	case *amqp.BasicCancel:
		return ch.basicCancel(m)
	case *amqp.BasicPublish:
		return ch.basicPublish(m)
	case *amqp.BasicGet:
		return ch.basicGet(m)
	case *amqp.BasicAck:
		return ch.basicAck(m)
	case *amqp.BasicReject:
		return ch.basicReject(m)
	case *amqp.BasicNack:
		return ch.basicNack(m)
	case *amqp.BasicRecover:
		if err := ch.recover(m.Requeue); err != nil {
			return err
		}
		ch.reply(&amqp.BasicRecoverOk{})
		return nil
	case *amqp.BasicRecoverAsync:
		return ch.recover(m.Requeue)

	case *amqp.ConfirmSelect:
		if ch.txMode {
			return amqp.Errorf(amqp.PreconditionFailed, "cannot switch from tx to confirm mode")
		}
		ch.confirmMode = true
		ch.mu.Lock()
		ch.shown.confirm = true
		ch.mu.Unlock()
		if !m.NoWait {
			ch.reply(&amqp.ConfirmSelectOk{})
		}
		return nil
	case *amqp.TxSelect:
		return ch.txSelect()
	case *amqp.TxCommit:
		return ch.txCommit()
	case *amqp.TxRollback:
		return ch.txRollback()
	}
	return amqp.Errorf(amqp.CommandInvalid, "unimplemented method")
}

// queueName resolves the empty name to the channel's last declared queue.
func (ch *channel) queueName(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if ch.lastQueue == "" {
		return "", amqp.Errorf(amqp.NotFound, "no previously declared queue")
	}
	return ch.lastQueue, nil
}
