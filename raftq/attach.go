package raftq

// attach adds consumer c.Consumer, or updates it when it is known. A known
// consumer keeps its checked-out messages and its place among
// single-active candidates (rabbit_fifo merge_consumer/5).
func (m *Machine) attach(index uint64, cmd *Command) {
	c := m.consumers[cmd.Consumer]
	if c != nil && c.getter {
		m.emit(Effect{Kind: EffectConsumerRefused, Consumer: cmd.Consumer, Reason: ReasonIDInUse})
		return
	}
	others := m.attached
	if c != nil && c.attached {
		others--
	}
	// An exclusive consumer must be alone, as basic.consume's exclusive
	// flag says and as Warren's classic queues enforce. (RabbitMQ 4.3's
	// quorum queues record the flag but do not enforce it.)
	if (m.exclusive != nil && m.exclusive != c) || (cmd.Exclusive && others > 0) {
		m.emit(Effect{Kind: EffectConsumerRefused, Consumer: cmd.Consumer, Reason: ReasonExclusive})
		return
	}
	if c != nil && cmd.Resume {
		m.returnUnreceived(c, cmd.LastDelivery)
	}
	switch {
	case c == nil:
		c = &consumer{id: cmd.Consumer, since: index}
		m.consumers[c.id] = c
		m.attached++
	case c.attached:
		m.lineup.leave(c)
	default:
		m.attached++
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
	c.timeout = m.cfg.ConsumerTimeout
	if cmd.HasTimeout {
		c.timeout = cmd.Timeout
	}
	if c.exclusive {
		m.exclusive = c
	} else if m.exclusive == c {
		m.exclusive = nil
	}
	if m.cfg.SingleActiveConsumer {
		m.activate()
		return
	}
	m.lineup.join(c)
	m.lineup.offer(c)
}

// returnUnreceived returns, oldest delivery first, the messages c holds
// whose deliveries are numbered above last: a consumer attaching again
// through a new leader never received them (the old leader failed before
// sending them). They were not delivered, so no failed delivery counts
// (rabbit_fifo_client instead asks the leader for the missing deliveries).
func (m *Machine) returnUnreceived(c *consumer, last uint64) {
	for i := 0; i < c.order.len(); i++ {
		d := *c.order.at(i)
		if d.seq <= last {
			continue
		}
		if x, ok := m.checkouts.takeLive(c, d); ok {
			m.putBack(x, ReturnNack)
		}
	}
	m.checkouts.tidy(c)
}

// detach cancels a consumer: it receives nothing more, but its checked-out
// messages stay with it, to be settled, returned or discarded by ID.
func (m *Machine) detach(id ConsumerID) {
	c := m.consumers[id]
	if c == nil || !c.attached {
		return
	}
	m.unattach(c)
	m.forgetIfIdle(c)
	m.activate()
}

// consumerDown removes a consumer whose channel or connection is gone. Its
// checked-out messages return, oldest delivery first, each counting a
// failed delivery (rabbit_fifo handle_down → return_all with
// delivery_failed = true).
func (m *Machine) consumerDown(id ConsumerID) {
	c := m.consumers[id]
	if c == nil {
		return
	}
	if c.attached {
		m.unattach(c)
	}
	for c.order.len() > 0 {
		d := c.order.pop()
		if x, ok := m.checkouts.takeLive(c, d); ok {
			m.putBack(x, ReturnConsumerGone)
		}
	}
	if c.held != 0 {
		panic("raftq: a consumer holds messages missing from its delivery order")
	}
	m.forgetIfIdle(c)
	m.activate()
}

// suspend stops handing messages to attached consumer id, whose link to
// the leader broke, while it keeps its place and what it holds: it may
// come back, attaching again under its ID, or be declared down once the
// consumer disconnected timeout has passed (rabbit_fifo's suspected_down
// consumers, which checkout skips). A suspended single-active candidate
// is activated only when nobody else is attached.
func (m *Machine) suspend(id ConsumerID) {
	c := m.consumers[id]
	if !m.Suspends() || c == nil || !c.attached || c.suspended {
		return
	}
	c.suspended = true
	m.lineup.stepOut(c) // it cannot receive
	m.activate()
}

// unattach stops dispatching to c.
func (m *Machine) unattach(c *consumer) {
	c.attached = false
	c.quiescing = false
	c.suspended = false
	m.attached--
	if m.exclusive == c {
		m.exclusive = nil
	}
	m.lineup.leave(c)
	if m.active == c {
		m.active = nil
	}
}

// forgetIfIdle removes c's record once it is neither attached nor holding
// messages; a consumer leaving renews the x-expires lease, as rabbit_fifo
// sets last_active when it removes one.
func (m *Machine) forgetIfIdle(c *consumer) {
	if c.attached || c.held > 0 {
		return
	}
	if c.order.len() > 0 {
		panic("raftq: an idle consumer has live deliveries")
	}
	delete(m.consumers, c.id)
	m.lastActive = m.clock
}

// activate applies the single-active-consumer rules after anything that
// may change who should be active (rabbit_fifo activate_next_consumer/2):
// with no active consumer, the best waiting one becomes active; when a
// waiting consumer has a higher priority than the active one, it takes over
// at once if the active one holds nothing, otherwise the active one
// quiesces (receives nothing more) and hands over once it has drained.
// The best waiting consumer has the highest priority, then the most credit,
// then attached first (rabbit_fifo sort_waiting/1). The consumers guide,
// "Single Active Consumer": "If the queue is a quorum queue, and a new
// consumer registers with a higher priority, then the queue stops delivering
// messages to the current active consumer. When all messages are
// acknowledged, the new consumer becomes the active consumer." If the
// higher-priority consumer leaves before that, the active one resumes
// (RabbitMQ instead keeps it quiescing until it drains, then reactivates it).
func (m *Machine) activate() {
	if !m.cfg.SingleActiveConsumer {
		return
	}
	var best *consumer
	for _, c := range m.consumers { // argmax under a total order: map order cannot show
		if c.attached && c != m.active && better(c, best) {
			best = c
		}
	}
	a := m.active
	switch {
	case best == nil:
		if a != nil {
			a.quiescing = false
		}
	case a == nil:
		m.active = best
		m.emit(Effect{Kind: EffectActive, Consumer: best.id, Active: true})
	case best.suspended || best.priority <= a.priority:
		// (A suspended consumer is not handed the place while the
		// active one is there.)
		a.quiescing = false
	case a.held == 0:
		a.quiescing = false
		m.active = best
		m.emit(Effect{Kind: EffectActive, Consumer: a.id, Active: false})
		m.emit(Effect{Kind: EffectActive, Consumer: best.id, Active: true})
	default:
		a.quiescing = true
	}
}

// better says whether c should be activated before b (nil: anyone is).
// A suspended consumer comes last: it is activated only when nobody else
// is attached, and then keeps the place until it is back or down.
func better(c, b *consumer) bool {
	switch {
	case b == nil:
		return true
	case c.suspended != b.suspended:
		return !c.suspended
	case c.priority != b.priority:
		return c.priority > b.priority
	case c.credit() != b.credit():
		return c.credit() > b.credit()
	}
	return c.since < b.since
}
