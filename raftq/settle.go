package raftq

// settle acknowledges messages: they are gone. IDs not checked out to the
// consumer (unknown, settled already, returned by a timeout since, or held
// by someone else) are ignored.
func (m *Machine) settle(id ConsumerID, ids []uint64) {
	c := m.consumers[id]
	if c == nil {
		return
	}
	for _, i := range ids {
		m.takeID(c, i)
	}
	m.afterTake(c)
}

// requeue returns messages, ahead of never-delivered ones.
func (m *Machine) requeue(id ConsumerID, ids []uint64, cause ReturnCause) {
	c := m.consumers[id]
	if c == nil {
		return
	}
	for _, i := range ids {
		if x, ok := m.takeID(c, i); ok {
			m.putBack(x, cause)
		}
	}
	m.afterTake(c)
}

// discard dead-letters messages rejected or nacked without requeue, reason
// rejected. basic.reject counts a failed delivery, basic.nack does not
// (rabbit_channel: reject → discard, nack → modify with delivery_failed
// false).
func (m *Machine) discard(id ConsumerID, ids []uint64, cause ReturnCause) {
	c := m.consumers[id]
	if c == nil {
		return
	}
	for _, i := range ids {
		if x, ok := m.takeID(c, i); ok {
			if cause.failed() {
				x.delivery = inc(x.delivery)
			}
			m.deadLetter(x, ReasonRejected)
		}
	}
	m.afterTake(c)
}

// takeID removes message i from c's checked-out messages.
func (m *Machine) takeID(c *consumer, i uint64) (msg, bool) {
	h, ok := m.held[i]
	if !ok || h.owner != c {
		return msg{}, false
	}
	delete(m.held, i)
	c.held--
	return h.msg, true
}

// take removes delivery d from c if it is still live.
func (m *Machine) take(c *consumer, d delivery) (msg, bool) {
	if !m.live(c, d) {
		return msg{}, false
	}
	return m.takeID(c, d.index)
}

// afterTake tidies up after messages left c: its delivery order, a
// single-active hand-over it was draining for, its record if it is idle,
// its place in line now that it has credit again.
func (m *Machine) afterTake(c *consumer) {
	m.tidy(c)
	if m.active == c && c.quiescing && c.held == 0 {
		// Drained: back to waiting, and the higher-priority consumer that
		// waited takes over (rabbit_fifo update_or_remove_con/4).
		c.quiescing = false
		m.active = nil
		m.emit(Effect{Kind: EffectActive, Consumer: c.id, Active: false})
		m.activate()
	}
	m.forgetIfIdle(c)
	m.lineup.offer(c)
}

// putBack returns a message to the queue for cause. Past the delivery
// limit it is dead-lettered instead (rabbit_fifo return_one/8: reason
// delivery_limit once delivery-count exceeds the limit).
func (m *Machine) putBack(x msg, cause ReturnCause) {
	if cause.failed() {
		x.delivery = inc(x.delivery)
	}
	if m.cfg.DeliveryLimit >= 0 && int64(x.delivery) > m.cfg.DeliveryLimit {
		m.deadLetter(x, ReasonDeliveryLimit)
		return
	}
	m.ready.pushReturned(x)
}

// inc adds one, saturating: a counter that could wrap would make an old
// message look new.
func inc(n uint32) uint32 {
	if n == ^uint32(0) {
		return n
	}
	return n + 1
}
