package raftq

// dispatch hands ready messages to consumers until either runs out. Before
// each message it checks the head for expiry, as rabbit_fifo checkout_one/4
// does, so an expired message is never delivered.
func (cs *consumers) dispatch() {
	for {
		h := cs.m.ready.head()
		if h == nil {
			return
		}
		if h.expired(cs.m.clock) {
			cs.m.expire()
			continue
		}
		c := cs.next()
		if c == nil {
			return
		}
		cs.deliver(c, cs.m.ready.pop())
	}
}

// next is the consumer whose turn it is to be handed a message, or nil
// when none can take one: the single active consumer, or the lineup's
// choice among competing consumers.
func (cs *consumers) next() *consumer {
	if cs.m.cfg.SingleActiveConsumer {
		if a := cs.active; a != nil && a.canReceive() {
			return a
		}
		return nil
	}
	return cs.lineup.next()
}

// deliver checks x out to c.
func (cs *consumers) deliver(c *consumer, x msg) {
	before := x.acquired
	x.acquired = inc(x.acquired)
	seq := cs.m.checkouts.hold(c, x, cs.m.clock)
	cs.m.emit(Effect{
		Kind:          EffectDeliver,
		Consumer:      c.id,
		Index:         x.index,
		Delivery:      seq,
		Redelivered:   before > 0,
		DeliveryCount: x.delivery,
		AcquiredCount: before,
	})
	cs.lineup.offer(c)
}

// get takes the next ready message for basic.get by owner id. With noAck
// it is gone at once; otherwise it is checked out to id until settled,
// returned or discarded, with the queue's consumer timeout.
func (cs *consumers) get(index uint64, id ConsumerID, noAck bool) {
	if cs.m.cfg.SingleActiveConsumer {
		// RabbitMQ refuses basic.get on such a queue (405 RESOURCE_LOCKED,
		// rabbit_channel); the runtime answers that before proposing.
		cs.m.emit(Effect{Kind: EffectGetEmpty, Consumer: id})
		return
	}
	// Every basic.get renews the x-expires lease (rabbit_fifo: "dequeue
	// always updates last_active").
	cs.m.lastActive = cs.m.clock
	c := cs.byID[id]
	if c != nil && !c.getter {
		cs.m.emit(Effect{Kind: EffectGetEmpty, Consumer: id})
		return
	}
	if h := cs.m.ready.head(); h != nil && h.expired(cs.m.clock) {
		cs.m.expire()
	}
	if cs.m.ready.n == 0 {
		cs.m.emit(Effect{Kind: EffectGetEmpty, Consumer: id})
		return
	}
	x := cs.m.ready.pop()
	before := x.acquired
	x.acquired = inc(x.acquired)
	var delivery uint64
	if !noAck {
		if c == nil {
			c = &consumer{id: id, since: index, getter: true, timeout: cs.m.cfg.ConsumerTimeout}
			cs.byID[id] = c
		}
		delivery = cs.m.checkouts.hold(c, x, cs.m.clock)
	}
	cs.m.emit(Effect{
		Kind:          EffectGetResult,
		Consumer:      id,
		Index:         x.index,
		Delivery:      delivery,
		Redelivered:   before > 0,
		DeliveryCount: x.delivery,
		AcquiredCount: before,
		Count:         uint32(cs.m.ready.n),
	})
}
