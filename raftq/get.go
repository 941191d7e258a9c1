package raftq

// get takes the next ready message for basic.get by owner id. With noAck
// it is gone at once; otherwise it is checked out to id until settled,
// returned or discarded, with the queue's consumer timeout.
func (m *Machine) get(index uint64, id ConsumerID, noAck bool) {
	if m.cfg.SingleActiveConsumer {
		// RabbitMQ refuses basic.get on such a queue (405 RESOURCE_LOCKED,
		// rabbit_channel); the runtime answers that before proposing.
		m.emit(Effect{Kind: EffectGetEmpty, Consumer: id})
		return
	}
	// Every basic.get renews the x-expires lease (rabbit_fifo: "dequeue
	// always updates last_active").
	m.lastActive = m.clock
	c := m.consumers[id]
	if c != nil && !c.getter {
		m.emit(Effect{Kind: EffectGetEmpty, Consumer: id})
		return
	}
	if h := m.ready.head(); h != nil && h.expired(m.clock) {
		m.expire()
	}
	if m.ready.n == 0 {
		m.emit(Effect{Kind: EffectGetEmpty, Consumer: id})
		return
	}
	x := m.ready.pop()
	before := x.acquired
	x.acquired = inc(x.acquired)
	var delivery uint64
	if !noAck {
		if c == nil {
			c = &consumer{id: id, since: index, getter: true, timeout: m.cfg.ConsumerTimeout}
			m.consumers[id] = c
		}
		delivery = m.checkouts.hold(c, x, m.clock)
	}
	m.emit(Effect{
		Kind:          EffectGetResult,
		Consumer:      id,
		Index:         x.index,
		Delivery:      delivery,
		Redelivered:   before > 0,
		DeliveryCount: x.delivery,
		AcquiredCount: before,
		Count:         uint32(m.ready.n),
	})
}

// purge removes every ready message, and the dead-lettered ones awaiting
// confirmation (rabbit_fifo: purge counts and drops both). Checked-out
// messages stay.
func (m *Machine) purge() {
	n := m.ready.clear() + m.delayed.clear() + m.dead.clear()
	m.emit(Effect{Kind: EffectPurged, Count: uint32(n)})
}
