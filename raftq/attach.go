package raftq

// attach adds consumer c.Consumer, or updates it when it is known. A known
// consumer keeps its checked-out messages and its place among
// single-active candidates (rabbit_fifo merge_consumer/5).
func (cs *consumers) attach(index uint64, cmd *Command) {
	c := cs.byID[cmd.Consumer]
	if c != nil && c.getter {
		cs.m.emit(Effect{Kind: EffectConsumerRefused, Consumer: cmd.Consumer, Reason: ReasonIDInUse})
		return
	}
	others := cs.attached
	if c != nil && c.attached {
		others--
	}
	// An exclusive consumer must be alone, as basic.consume's exclusive
	// flag says and as Warren's classic queues enforce. (RabbitMQ 4.3's
	// quorum queues record the flag but do not enforce it.)
	if (cs.exclusive != nil && cs.exclusive != c) || (cmd.Exclusive && others > 0) {
		cs.m.emit(Effect{Kind: EffectConsumerRefused, Consumer: cmd.Consumer, Reason: ReasonExclusive})
		return
	}
	if c != nil && cmd.Resume {
		cs.returnUnreceived(c, cmd.LastDelivery)
	}
	switch {
	case c == nil:
		c = &consumer{id: cmd.Consumer, since: index}
		cs.byID[c.id] = c
		cs.attached++
	case c.attached:
		cs.lineup.leave(c)
	default:
		cs.attached++
	}
	c.attached = true
	c.quiescing = false
	c.suspended = false
	c.exclusive = cmd.Exclusive
	c.priority = cmd.ConsumerPriority
	c.prefetch = cmd.Prefetch
	if c.prefetch == 0 {
		c.prefetch = UnlimitedPrefetch
	}
	c.timeout = cs.m.cfg.ConsumerTimeout
	if cmd.HasTimeout {
		c.timeout = cmd.Timeout
	}
	if c.exclusive {
		cs.exclusive = c
	} else if cs.exclusive == c {
		cs.exclusive = nil
	}
	if cs.m.cfg.SingleActiveConsumer {
		cs.activate()
		return
	}
	cs.lineup.join(c)
	cs.lineup.offer(c)
}

// returnUnreceived returns, oldest delivery first, the messages c holds
// whose deliveries are numbered above last: a consumer attaching again
// through a new leader never received them (the old leader failed before
// sending them). They were not delivered, so no failed delivery counts
// (rabbit_fifo_client instead asks the leader for the missing deliveries).
func (cs *consumers) returnUnreceived(c *consumer, last uint64) {
	for i := 0; i < c.order.len(); i++ {
		d := *c.order.at(i)
		if d.seq <= last {
			continue
		}
		if x, ok := cs.m.checkouts.takeLive(c, d); ok {
			cs.m.putBack(x, ReturnNack)
		}
	}
	cs.m.checkouts.tidy(c)
}

// detach cancels a consumer: it receives nothing more, but its checked-out
// messages stay with it, to be settled, returned or discarded by ID.
func (cs *consumers) detach(id ConsumerID) {
	c := cs.byID[id]
	if c == nil || !c.attached {
		return
	}
	cs.unattach(c)
	cs.forgetIfIdle(c)
	cs.activate()
}

// down removes a consumer whose channel or connection is gone. Its
// checked-out messages return, oldest delivery first, each counting a
// failed delivery (rabbit_fifo handle_down → return_all with
// delivery_failed = true).
func (cs *consumers) down(id ConsumerID) {
	c := cs.byID[id]
	if c == nil {
		return
	}
	if c.attached {
		cs.unattach(c)
	}
	for c.order.len() > 0 {
		d := c.order.pop()
		if x, ok := cs.m.checkouts.takeLive(c, d); ok {
			cs.m.putBack(x, ReturnConsumerGone)
		}
	}
	if c.held != 0 {
		panic("raftq: a consumer holds messages missing from its delivery order")
	}
	cs.forgetIfIdle(c)
	cs.activate()
}

// suspend stops handing messages to attached consumer id, whose link to
// the leader broke, while it keeps its place and what it holds: it may
// come back, attaching again under its ID, or be declared down once the
// consumer disconnected timeout has passed (rabbit_fifo's suspected_down
// consumers, which checkout skips). A suspended single-active candidate
// is activated only when nobody else is attached.
func (cs *consumers) suspend(id ConsumerID) {
	c := cs.byID[id]
	if !cs.m.Suspends() || c == nil || !c.attached || c.suspended {
		return
	}
	c.suspended = true
	cs.lineup.stepOut(c) // it cannot receive
	cs.activate()
}

// unattach stops dispatching to c.
func (cs *consumers) unattach(c *consumer) {
	c.attached = false
	c.quiescing = false
	c.suspended = false
	cs.attached--
	if cs.exclusive == c {
		cs.exclusive = nil
	}
	cs.lineup.leave(c)
	if cs.active == c {
		cs.active = nil
	}
}

// forgetIfIdle removes c's record once it is neither attached nor holding
// messages; a consumer leaving renews the x-expires lease, as rabbit_fifo
// sets last_active when it removes one.
func (cs *consumers) forgetIfIdle(c *consumer) {
	if c.attached || c.held > 0 {
		return
	}
	if c.order.len() > 0 {
		panic("raftq: an idle consumer has live deliveries")
	}
	delete(cs.byID, c.id)
	cs.m.lastActive = cs.m.clock
}
