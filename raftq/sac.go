package raftq

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
func (cs *consumers) activate() {
	if !cs.m.cfg.SingleActiveConsumer {
		return
	}
	var best *consumer
	for _, c := range cs.byID { // argmax under a total order: map order cannot show
		if c.attached && c != cs.active && better(c, best) {
			best = c
		}
	}
	a := cs.active
	switch {
	case best == nil:
		if a != nil {
			a.quiescing = false
		}
	case a == nil:
		cs.active = best
		cs.m.emit(Effect{Kind: EffectActive, Consumer: best.id, Active: true})
	case best.suspended || best.priority <= a.priority:
		// (A suspended consumer is not handed the place while the
		// active one is there.)
		a.quiescing = false
	case a.held == 0:
		a.quiescing = false
		cs.active = best
		cs.m.emit(Effect{Kind: EffectActive, Consumer: a.id, Active: false})
		cs.m.emit(Effect{Kind: EffectActive, Consumer: best.id, Active: true})
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
