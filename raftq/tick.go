package raftq

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// tick brings the queue to its clock: expired messages leave every level's
// head, deliveries past their consumer timeout return, and an unused queue
// past x-expires asks to be deleted. The leader proposes a Tick only when
// NextDeadline is due, so an idle queue writes nothing.
func (m *Machine) tick() {
	m.expire()
	m.consumers.timeouts()
	if m.cfg.Expires >= 0 && !m.deleteRequested && len(m.consumers.byID) == 0 &&
		m.clock > addSat(m.lastActive, m.cfg.Expires) {
		// rabbit_fifo is_expired/2: Ts > LastActive + Expires with no
		// consumer (a cancelled one still holding messages counts).
		m.deleteRequested = true
		m.emit(Effect{Kind: EffectDeleteQueue})
	}
}

// timeouts returns every delivery held past its consumer timeout. As in
// RabbitMQ 4.3 (rabbit_fifo evaluate_consumer_timeout), only the timed-out
// messages return, acquired-count +1 and delivery-count unchanged; the
// consumer is cancelled (EffectCancelConsumer: basic.cancel, or a channel
// error for a client without consumer_cancel_notify) and its other
// messages stay checked out, settleable, each with its own deadline.
func (cs *consumers) timeouts() {
	var due []*consumer
	for _, c := range cs.byID {
		if c.held > 0 && cs.m.checkouts.earliestDeadline(c) <= cs.m.clock {
			due = append(due, c)
		}
	}
	slices.SortFunc(due, func(a, b *consumer) int { return cmpID(a.id, b.id) })
	for _, c := range due {
		if c.attached {
			cs.m.emit(Effect{Kind: EffectCancelConsumer, Consumer: c.id, Reason: ReasonConsumerTimeout})
			cs.unattach(c)
		} else if c.getter {
			// A basic.get delivery timed out: there is no consumer to
			// cancel, so the channel is closed (rabbit_channel falls back to
			// the 406 when the tag is not one of its consumers).
			cs.m.emit(Effect{Kind: EffectCancelConsumer, Consumer: c.id, Reason: ReasonConsumerTimeout})
		}
		for c.order.len() > 0 {
			k, d := &cs.m.checkouts, *c.order.peek()
			if k.live(c, d) && k.held[d.index].deadline > cs.m.clock {
				break
			}
			c.order.pop()
			if x, ok := k.takeLive(c, d); ok {
				cs.m.putBack(x, ReturnTimeout)
			}
		}
		cs.afterTake(c)
	}
	cs.activate()
}

func cmpID(a, b ConsumerID) int { return cmp.Compare(a, b) }

// NextDeadline is when the queue next needs a Tick: the earliest of the
// expiry of a message at the head of the returns or of a priority level,
// the consumer-timeout deadline of a checked-out message, the x-expires
// deadline of a queue without consumers, and the time the first message
// waiting out a delayed retry is ready again. ok is false when nothing is
// pending: an idle queue needs no Tick.
func (m *Machine) NextDeadline() (at int64, ok bool) {
	at = math.MaxInt64
	soonest := func(t int64) {
		at, ok = min(at, t), true
	}
	if t, expiring := m.ready.nextExpiry(); expiring {
		soonest(t)
	}
	if t, holding := m.consumers.nextTimeout(); holding {
		soonest(t)
	}
	if m.cfg.Expires >= 0 && !m.deleteRequested && len(m.consumers.byID) == 0 {
		soonest(addSat(addSat(m.lastActive, m.cfg.Expires), 1))
	}
	if t, waiting := m.delayed.next(); waiting {
		soonest(t)
	}
	return at, ok
}

// expire dead-letters expired messages from the head of the returns and of
// every priority level, stopping in each at the first unexpired message
// (rabbit_fifo expire_batch/3; the priority guide's "Priority-Aware Message
// Expiration"). Behind an unexpired head, a message waits, as the TTL guide
// says quorum queues expire "when they reach the head of the queue".
func (m *Machine) expire() {
	r := &m.ready
	if r.expiring == 0 {
		return
	}
	for r.returns.len() > 0 && r.returns.peek().expired(m.clock) {
		x := r.returns.pop()
		r.count(&x, -1)
		m.deadLetter(x, ReasonExpired)
	}
	for b := r.nonEmpty; b != 0; {
		p := bits.Len32(b) - 1
		b &^= 1 << p
		for r.levels[p].len() > 0 && r.levels[p].peek().expired(m.clock) {
			m.deadLetter(r.popLevel(p), ReasonExpired)
		}
	}
}

// addSat is a + b for b >= 0, saturating instead of overflowing.
func addSat(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// nextTimeout is the earliest consumer-timeout deadline of a checked-out
// message; false when none is checked out.
func (cs *consumers) nextTimeout() (at int64, ok bool) {
	for _, c := range cs.byID { // a minimum: map order cannot show
		if c.held > 0 {
			if t := cs.m.checkouts.earliestDeadline(c); !ok || t < at {
				at, ok = t, true
			}
		}
	}
	return at, ok
}
