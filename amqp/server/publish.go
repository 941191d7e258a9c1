package server

import (
	"errors"
	"slices"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/raftq/queue"
)

// contentAssembly collects basic.publish, its content header and body
// frames: method → header → body*, with nothing else in between on the
// channel (505 UNEXPECTED_FRAME otherwise).
type contentAssembly struct {
	publish *wire.BasicPublish
	header  wire.ContentHeader
	gotHdr  bool
	body    []byte
	size    uint64 // announced by the header
}

func (a *contentAssembly) active() bool { return a.publish != nil }

func (a *contentAssembly) reset() { *a = contentAssembly{} }

// unexpected is the error for a method frame arriving mid-content.
func (a *contentAssembly) unexpected() error {
	if !a.gotHdr {
		return withMethod(wire.Errorf(wire.UnexpectedFrame, "expected content header for class 60, got non content header frame instead"), a.publish)
	}
	return withMethod(wire.Errorf(wire.UnexpectedFrame, "expected content body, got non content body frame instead"), a.publish)
}

// publisher is a channel's publishing side, run by the reader under
// channel.op: it assembles a basic.publish with its content frames,
// checks and routes the message, and hands it to its queues (or to the
// open transaction, tx.go), confirming it in confirm mode.
type publisher struct {
	ch *channel

	// Owned by the reader, under channel.op.
	content     contentAssembly
	canPublish  map[string]bool // write permission, per exchange, as of permEpoch
	permEpoch   uint64          // broker.PermissionsEpoch when canPublish was filled
	routeBuf    []*broker.Queue
	keyBuf      []string // a publish's routing keys (CC, BCC)
	confirmMode bool

	// confirms has its own lock: queue goroutines complete publishes
	// and the writer collects the confirms (locking.md).
	confirms confirmTracker
}

func (p *publisher) init(ch *channel) {
	p.ch = ch
	p.canPublish = make(map[string]bool)
}

func (p *publisher) basicPublish(m *wire.BasicPublish) error {
	if m.Immediate {
		return wire.Errorf(wire.NotImplemented, "immediate=true")
	}
	// Hold a publisher while a resource alarm is in effect (alarms.go).
	if err := p.ch.c.waitForAlarms(); err != nil {
		return err
	}
	p.content.publish = m
	return nil
}

func (p *publisher) contentHeader(payload []byte) error {
	a := &p.content
	if !a.active() {
		return wire.Errorf(wire.UnexpectedFrame, "expected method frame, got non method frame instead")
	}
	if a.gotHdr {
		return a.unexpected()
	}
	h, err := wire.DecodeContentHeader(payload)
	if err != nil {
		return withMethodErr(err, a.publish)
	}
	if h.ClassID != wire.ClassBasic {
		return withMethod(wire.Errorf(wire.UnexpectedFrame, "expected content header for class 60, got one for class %d instead", h.ClassID), a.publish)
	}
	// Checked before a byte of the body is read, so an oversized message
	// costs nothing; the channel closes and its body frames are ignored.
	if max := p.ch.c.s.cfg.MaxMessageSize; h.BodySize > max {
		pub := a.publish
		a.reset()
		return withMethod(wire.Errorf(wire.PreconditionFailed, "message size %d is larger than configured max size %d", h.BodySize, max), pub)
	}
	a.header = h
	a.gotHdr = true
	if h.BodySize == 0 {
		return p.completePublish()
	}
	a.size = h.BodySize
	a.body = make([]byte, 0, min(h.BodySize, uint64(p.ch.c.frameMax)))
	return nil
}

func (p *publisher) contentBody(payload []byte) error {
	a := &p.content
	if !a.active() {
		return wire.Errorf(wire.UnexpectedFrame, "expected method frame, got non method frame instead")
	}
	if !a.gotHdr {
		return a.unexpected()
	}
	if uint64(len(payload)) > a.size-uint64(len(a.body)) {
		return withMethod(wire.Errorf(wire.FrameError, "content body frame exceeds remaining content size"), a.publish)
	}
	a.body = append(a.body, payload...)
	if uint64(len(a.body)) < a.size {
		return nil
	}
	return p.completePublish()
}

// completePublish routes the assembled message and hands it to its
// queues. With confirms on, the publish is confirmed when every queue has
// stored it (for a quorum queue: committed by a majority), and nacked if
// any refused it.
func (p *publisher) completePublish() error {
	ch := p.ch
	a := &p.content
	pub := a.publish
	msg := &queue.Message{
		Exchange:   pub.Exchange,
		RoutingKey: pub.RoutingKey,
		Properties: a.header.Properties,
		Body:       a.body,
	}
	a.reset()

	if err := p.checkPublish(pub.Exchange); err != nil {
		return withMethod(err.(*wire.Error), pub)
	}
	ch.c.stats.add(cReceived, 1)
	if p.confirmMode {
		ch.c.stats.add(cReceivedConfirm, 1)
	}
	// Direct reply-to: the requester's reply_to is rewritten to name this
	// channel's reply consumer; a reply to such a name bypasses routing.
	if msg.Properties.ReplyTo == replyToQueue {
		if ch.replyTo == "" {
			return withMethod(wire.Errorf(wire.PreconditionFailed, "fast reply consumer does not exist"), pub)
		}
		msg.Properties.ReplyTo = ch.replyTo
	}
	// Sender-selected distribution: the CC and BCC headers' keys route
	// too, and BCC is taken out of the message (as RabbitMQ does).
	headers := msg.Properties.Headers
	p.keyBuf = broker.RoutingKeys(p.keyBuf[:0], pub.RoutingKey, headers)
	if _, ok := headers["BCC"]; ok {
		msg.Properties.Headers = withoutBCC(headers)
	}
	// Through the default exchange, a rewritten reply_to name (as the
	// routing key or in CC/BCC) reaches its reply consumer directly.
	var replies replyRoute
	if pub.Exchange == "" {
		replies = ch.c.s.replies.route(p.keyBuf, ch.c.s.replyNodeRunning)
	}
	var err error
	p.routeBuf, err = ch.c.vhost.Route(pub.Exchange, p.keyBuf, headers, p.routeBuf[:0])
	clear(p.keyBuf)
	if errors.Is(err, broker.ErrRouteUncertain) {
		p.refuseUncertain(pub)
		return nil
	}
	if err != nil {
		return withMethodErr(err, pub)
	}
	if err := p.checkUserID(msg.Properties.UserID); err != nil {
		clear(p.routeBuf)
		return withMethod(err, pub)
	}

	if ch.tx.on {
		err := ch.tx.bufferPublish(pub, msg, p.routeBuf, replies)
		clear(p.routeBuf)
		return withMethodErr(err, pub)
	}
	p.deliverRouted(pub, msg, p.routeBuf, replies)
	return nil
}

// deliverRouted hands msg to the queues and direct reply-to consumers it
// was routed to (other nodes' reply consumers through a relay, now), or
// returns it when it is mandatory and routed nowhere. It clears qs. A
// reply counts as stored once routed (replyRoute.targets).
func (p *publisher) deliverRouted(pub *wire.BasicPublish, msg *queue.Message, qs []*broker.Queue, replies replyRoute) {
	ch := p.ch
	replies.deliver(ch.c.s, msg)
	if len(qs) == 0 && replies.targets > 0 {
		ch.c.stats.add(cRouted, 1)
		if p.confirmMode {
			p.confirms.publish(0)
			ch.c.out.confirmsReady(ch)
		}
		return
	}
	if len(qs) == 0 {
		if pub.Mandatory {
			ch.c.stats.add(cUnroutableReturned, 1)
			// Pushed before the confirm is even registered: the writer
			// may collect this channel's completed confirms at any moment
			// (an earlier publish put the channel on its list), so a
			// basic.return pushed after registering could lose the race
			// to its own basic.ack.
			ch.c.out.push(outItem{
				channel: ch.id,
				method:  &wire.BasicReturn{ReplyCode: wire.NoRoute, ReplyText: "NO_ROUTE", Exchange: pub.Exchange, RoutingKey: pub.RoutingKey},
				props:   &msg.Properties,
				body:    msg.Body,
			})
		} else {
			ch.c.stats.add(cUnroutableDropped, 1)
		}
		if p.confirmMode {
			p.confirms.publish(0)
			ch.c.out.confirmsReady(ch)
		}
		return
	}
	ch.c.stats.add(cRouted, 1)
	var seq uint64
	if p.confirmMode {
		seq = p.confirms.publish(len(qs))
	}
	confirm := noConfirm
	if p.confirmMode {
		confirm = p.confirmer(seq)
	}
	for i, q := range qs {
		qs[i] = nil
		if err := q.Engine().Enqueue(ch.ctx, msg, confirm); err != nil && ch.ctx.Err() == nil {
			ch.c.log.Debug("enqueue failed", "queue", q.Name(), "err", err)
		}
	}
}

func noConfirm(error) {}

// confirmer is the queue.Confirm of publish seq: once every queue the
// message was routed to has answered, the confirm tracker holds basic.ack
// (or basic.nack) for it, and the writer is woken to send it.
func (p *publisher) confirmer(seq uint64) queue.Confirm {
	return func(err error) {
		if p.confirms.complete(seq, err == nil) {
			p.ch.c.out.confirmsReady(p.ch)
		}
	}
}

// refuseUncertain answers a publish this node could not route for sure
// (broker.ErrRouteUncertain): basic.nack in confirm mode, so that the
// publisher sends it again; without confirms there is nobody to tell.
func (p *publisher) refuseUncertain(pub *wire.BasicPublish) {
	ch := p.ch
	ch.c.log.Warn("publish refused: this node cannot tell where it goes", "channel", ch.id, "exchange", pub.Exchange, "routing_key", pub.RoutingKey, "confirm", p.confirmMode)
	if p.confirmMode {
		seq := p.confirms.publish(1)
		if p.confirms.complete(seq, false) {
			ch.c.out.confirmsReady(ch)
		}
	}
}

// withoutBCC is headers less its BCC entry, in a new table (only
// messages carrying BCC pay for it).
func withoutBCC(headers wire.Table) wire.Table {
	out := make(wire.Table, len(headers)-1)
	for k, v := range headers {
		if k != "BCC" {
			out[k] = v
		}
	}
	return out
}

// checkUserID refuses a user-id property that names someone other than
// the connection's user, unless the user is tagged impersonator, as
// RabbitMQ does (rabbit_access_control:check_user_id): consumers may
// trust user-id to say who published.
func (p *publisher) checkUserID(claimed string) *wire.Error {
	u := p.ch.c.user
	if claimed == "" || claimed == u.Name || slices.Contains(u.Tags, "impersonator") {
		return nil
	}
	return wire.Errorf(wire.PreconditionFailed, "user_id property set to '%s' but authenticated user was '%s'", claimed, u.Name)
}

// checkPublish checks write permission on the exchange once per channel
// and exchange, again after any change to users or permissions reached
// this node. RabbitMQ checks the default exchange as "amq.default".
func (p *publisher) checkPublish(exchange string) error {
	if e := p.ch.c.s.broker.PermissionsEpoch(); e != p.permEpoch {
		clear(p.canPublish)
		p.permEpoch = e
	}
	if p.canPublish[exchange] {
		return nil
	}
	name := exchange
	if name == "" {
		name = "amq.default"
	}
	if err := p.ch.c.vhost.CheckPublish(p.ch.c.user, name); err != nil {
		return err
	}
	p.canPublish[exchange] = true
	return nil
}

// forgetExchange drops the permission checked for a deleted exchange: one
// declared again under its name is checked afresh.
func (p *publisher) forgetExchange(exchange string) { delete(p.canPublish, exchange) }

// confirmSelect carries out confirm.select.
func (p *publisher) confirmSelect(m *wire.ConfirmSelect) error {
	ch := p.ch
	if ch.tx.on {
		return wire.Errorf(wire.PreconditionFailed, "cannot switch from tx to confirm mode")
	}
	p.confirmMode = true
	ch.mu.Lock()
	ch.shown.confirm = true
	ch.mu.Unlock()
	if !m.NoWait {
		ch.reply(&wire.ConfirmSelectOk{})
	}
	return nil
}
