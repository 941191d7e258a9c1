package raftq

import (
	"math"
	"math/bits"
)

// dispatch hands ready messages to consumers until either runs out. Before
// each message it checks the head for expiry, as rabbit_fifo checkout_one/4
// does, so an expired message is never delivered.
func (m *Machine) dispatch() {
	for {
		h := m.ready.head()
		if h == nil {
			return
		}
		if h.expired(m.clock) {
			m.expire()
			continue
		}
		c := m.nextConsumer()
		if c == nil {
			return
		}
		m.deliver(c, m.ready.pop())
	}
}

func (m *Machine) nextConsumer() *consumer {
	if m.cfg.SingleActiveConsumer {
		if a := m.active; a != nil && a.canReceive() {
			return a
		}
		return nil
	}
	return m.lineup.next()
}

// deliver checks x out to c.
func (m *Machine) deliver(c *consumer, x msg) {
	before := x.acquired
	x.acquired = inc(x.acquired)
	seq := m.checkouts.hold(c, x, m.clock)
	m.emit(Effect{
		Kind:          EffectDeliver,
		Consumer:      c.id,
		Index:         x.index,
		Delivery:      seq,
		Redelivered:   before > 0,
		DeliveryCount: x.delivery,
		AcquiredCount: before,
	})
	m.lineup.offer(c)
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

// enforceLimits applies x-overflow=drop-head: while the ready messages
// (plus those awaiting at-least-once dead-lettering) exceed x-max-length or
// x-max-length-bytes, the head is dead-lettered with reason maxlen
// (rabbit_fifo evaluate_limit/4 → drop_head/2, run after every command, so
// a requeue can push out the message it requeued). A head that has expired
// meanwhile goes as expired instead, so no command leaves an expired
// message at the head.
func (m *Machine) enforceLimits() {
	if m.cfg.Overflow != DropHead {
		return
	}
	for m.ready.n > 0 && m.overLimit(0, 0) {
		m.deadLetter(m.ready.pop(), ReasonMaxLen)
		if h := m.ready.head(); h != nil && h.expired(m.clock) {
			m.expire()
		}
	}
}

// overLimit says whether the queue would exceed its length limits with n
// more messages of size bytes. Only ready messages count, as in RabbitMQ
// (is_over_limit/1: messages_ready_plus_delayed plus at-least-once dead
// letters), and those waiting out a delayed retry; a checked-out message
// does not. drop-head drops ready messages only.
func (m *Machine) overLimit(n int, size int64) bool {
	count := int64(m.ready.n + len(m.delayed.q) + len(m.dead.byIndex) + n)
	bytes := m.ready.bytes + m.delayed.bytes + m.dead.bytes + size
	return (m.cfg.MaxLength >= 0 && count > m.cfg.MaxLength) ||
		(m.cfg.MaxLengthBytes >= 0 && bytes > m.cfg.MaxLengthBytes)
}

// addSat is a + b for b >= 0, saturating instead of overflowing.
func addSat(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
