package raftq

// deadLetter is a message awaiting at-least-once dead-lettering.
type deadLetter struct {
	msg
	reason Reason
	time   int64
}

// deadLetters keeps at-least-once dead letters until their target queues
// confirm them: by ID, and in dead-lettering order for re-sending.
type deadLetters struct {
	byIndex map[uint64]deadLetter
	order   ring[uint64] // some stale: settled since
	bytes   int64
}

func (d *deadLetters) add(x deadLetter) {
	d.byIndex[x.index] = x
	d.order.push(x.index)
	d.bytes += int64(x.size)
}

func (d *deadLetters) remove(i uint64) {
	x, ok := d.byIndex[i]
	if !ok {
		return
	}
	delete(d.byIndex, i)
	d.bytes -= int64(x.size)
}

// tidy keeps order's head live and its length proportional to the live.
func (d *deadLetters) tidy() {
	live := func(i *uint64) bool { _, ok := d.byIndex[*i]; return ok }
	for d.order.len() > 0 && !live(d.order.peek()) {
		d.order.pop()
	}
	if d.order.len() > 2*len(d.byIndex)+16 {
		d.order.filter(live)
	}
}

func (d *deadLetters) clear() int {
	n := len(d.byIndex)
	if n > 0 || d.order.len() > 0 {
		*d = deadLetters{byIndex: make(map[uint64]deadLetter)}
	}
	return n
}

// deadLetter sends x away for reason r. Without a dead-letter exchange it
// is dropped; at-most-once hands it to the runtime and forgets it;
// at-least-once keeps it, counted against the queue's limits, until
// DeadLetterSettled (rabbit_fifo discard_or_dead_letter/4; maxlen never
// happens there, as at-least-once requires reject-publish).
func (m *Machine) deadLetter(x msg, r Reason) {
	e := Effect{
		Kind:          EffectDeadLetter,
		Reason:        r,
		Index:         x.index,
		DeliveryCount: x.delivery,
		AcquiredCount: x.acquired,
		Time:          m.clock,
	}
	switch {
	case !m.cfg.DeadLettering:
		e.Kind = EffectDrop
	case m.cfg.Strategy == AtLeastOnce && r != ReasonMaxLen:
		e.AtLeastOnce = true
		m.dead.add(deadLetter{msg: x, reason: r, time: m.clock})
	}
	m.emit(e)
}

// settled forgets the dead letters whose target queues confirmed them.
// Unknown IDs (settled already, purged) are ignored.
func (d *deadLetters) settled(ids []uint64) {
	for _, i := range ids {
		d.remove(i)
	}
	d.tidy()
}

// each calls f on every dead letter, in dead-lettering order.
func (d *deadLetters) each(f func(*deadLetter)) {
	for i := 0; i < d.order.len(); i++ {
		if x, ok := d.byIndex[*d.order.at(i)]; ok {
			f(&x)
		}
	}
}

// AppendPendingDeadLetters appends an EffectDeadLetter for every
// at-least-once dead letter not yet settled, oldest first: a new leader
// carries them out again (the target queues may see duplicates, as with
// RabbitMQ's dead-letter worker after a leader change).
func (m *Machine) AppendPendingDeadLetters(out []Effect) []Effect {
	m.dead.each(func(x *deadLetter) {
		out = append(out, Effect{
			Kind:          EffectDeadLetter,
			Reason:        x.reason,
			AtLeastOnce:   true,
			Index:         x.index,
			DeliveryCount: x.delivery,
			AcquiredCount: x.acquired,
			Time:          x.time,
		})
	})
	return out
}
