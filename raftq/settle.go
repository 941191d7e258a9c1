package raftq

// settle acknowledges messages: they are gone. IDs not checked out to the
// consumer (unknown, settled already, returned by a timeout since, or held
// by someone else) are ignored.
func (cs *consumers) settle(id ConsumerID, ids []uint64) {
	c := cs.byID[id]
	if c == nil {
		return
	}
	for _, i := range ids {
		cs.m.checkouts.take(c, i)
	}
	cs.afterTake(c)
}

// requeue returns messages, ahead of never-delivered ones.
func (cs *consumers) requeue(id ConsumerID, ids []uint64, cause ReturnCause) {
	c := cs.byID[id]
	if c == nil {
		return
	}
	for _, i := range ids {
		if x, ok := cs.m.checkouts.take(c, i); ok {
			cs.m.putBack(x, cause)
		}
	}
	cs.afterTake(c)
}

// discard dead-letters messages rejected or nacked without requeue, reason
// rejected. basic.reject counts a failed delivery, basic.nack does not
// (rabbit_channel: reject → discard, nack → modify with delivery_failed
// false).
func (cs *consumers) discard(id ConsumerID, ids []uint64, cause ReturnCause) {
	c := cs.byID[id]
	if c == nil {
		return
	}
	for _, i := range ids {
		if x, ok := cs.m.checkouts.take(c, i); ok {
			if cause.failed() {
				x.delivery = inc(x.delivery)
			}
			cs.m.deadLetter(x, ReasonRejected)
		}
	}
	cs.afterTake(c)
}

// afterTake tidies up after messages left c: its delivery order, a
// single-active hand-over it was draining for, its record if it is idle,
// its place in line now that it has credit again.
func (cs *consumers) afterTake(c *consumer) {
	cs.m.checkouts.tidy(c)
	if cs.active == c && c.quiescing && c.held == 0 {
		// Drained: back to waiting, and the higher-priority consumer that
		// waited takes over (rabbit_fifo update_or_remove_con/4).
		c.quiescing = false
		cs.active = nil
		cs.m.emit(Effect{Kind: EffectActive, Consumer: c.id, Active: false})
		cs.activate()
	}
	cs.forgetIfIdle(c)
	cs.lineup.offer(c)
}

// putBack returns a message to the queue for cause. Past the delivery
// limit it is dead-lettered instead (rabbit_fifo return_one/8: reason
// delivery_limit once delivery-count exceeds the limit); with a delayed
// retry for cause it waits before it is ready.
func (m *Machine) putBack(x msg, cause ReturnCause) {
	if cause.failed() {
		x.delivery = inc(x.delivery)
	}
	if m.cfg.DeliveryLimit >= 0 && int64(x.delivery) > m.cfg.DeliveryLimit {
		m.deadLetter(x, ReasonDeliveryLimit)
		return
	}
	if at, ok := m.cfg.Retry.readyAt(&x, cause, m.clock); ok {
		m.delayed.push(at, x)
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

// HoldersOf turns deliveries (Effect.Delivery) into the IDs of their
// messages grouped by the consumer holding them, the consumers in the
// order they first appear: what Settle, Return and Discard commands name.
// Deliveries no longer checked out (settled, returned, taken back by a
// timeout, or unknown) are left out, so a late or repeated settlement of
// one changes nothing; unknown lists them (nil when none), for a member
// that may not have applied their handing-out yet.
func (m *Machine) HoldersOf(deliveries []uint64) (order []ConsumerID, groups map[ConsumerID][]uint64, unknown []uint64) {
	groups = make(map[ConsumerID][]uint64, 1)
	for _, d := range deliveries {
		c, index, ok := m.HeldBy(d)
		if !ok {
			unknown = append(unknown, d)
			continue
		}
		if _, seen := groups[c]; !seen {
			order = append(order, c)
		}
		groups[c] = append(groups[c], index)
	}
	return order, groups, unknown
}

// HeldBy names the consumer holding the message of delivery (a
// Effect.Delivery) and the message's ID; false once that handing-out is
// settled, returned or discarded.
func (m *Machine) HeldBy(delivery uint64) (ConsumerID, uint64, bool) {
	return m.checkouts.heldBy(delivery)
}

// AppendDeliveries appends the deliveries (Effect.Delivery) consumer id
// holds, oldest first.
func (m *Machine) AppendDeliveries(id ConsumerID, dst []uint64) []uint64 {
	c := m.consumers.byID[id]
	if c == nil {
		return dst
	}
	return m.checkouts.appendDeliveries(c, dst)
}
