package raftq

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
