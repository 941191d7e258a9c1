package raftq

// publisher is the deduplication record of one publisher: the sequence
// number it must send next, and the recent ranges of sequence numbers
// whose publish was refused (so a re-sent refused publish is refused
// again rather than confirmed).
type publisher struct {
	next     uint64
	rejected []seqRange
}

// publishers holds the record of every tracked publisher, by ID.
type publishers map[uint64]publisher

// sequence checks the sequence number of tracked publish c. When it is
// the number the publisher must send next, ok is true and p is the
// publisher's record once c is stored. Otherwise c is not stored, and
// answer is what the publisher is told instead.
//
// A tracked publisher (Publisher != 0) numbers its publishes 1, 2, 3...
// per queue; as rabbit_fifo's enqueuer record does, the queue accepts the
// next number, confirms again a number it has seen (a publish re-sent after
// a leader change, not stored twice), and refuses one that skips ahead.
// A publisher the queue has not seen yet starts at 1, as a new enqueuer
// does in rabbit_fifo: taking whatever number came first would confirm
// the lower ones, should they arrive later, as seen without storing them.
// (The chaos harness lost confirmed messages that way: a burst re-sent to
// a new leader whose first publishes were refused while it was still
// taking office, and later ones accepted.)
func (ps publishers) sequence(c *Command) (p publisher, answer Effect, ok bool) {
	p, known := ps[c.Publisher]
	if !known {
		p.next = 1
	}
	switch {
	case c.Seq == p.next:
		p.next = c.Seq + 1
		return p, Effect{}, true
	case c.Seq > p.next:
		return p, Effect{Kind: EffectOutOfSequence, Publisher: c.Publisher, Seq: c.Seq, Index: p.next}, false
	case p.wasRejected(c.Seq):
		return p, Effect{Kind: EffectReject, Publisher: c.Publisher, Seq: c.Seq}, false
	}
	return p, Effect{Kind: EffectConfirm, Publisher: c.Publisher, Seq: c.Seq}, false
}

// seqRange is the sequence numbers [from, to).
type seqRange struct{ from, to uint64 }

// maxRejectedRanges bounds a publisher's memory of refusals. A publisher
// re-sends only its unconfirmed publishes, the latest ones; a queue that
// refuses publishes refuses runs of them, each one range.
const maxRejectedRanges = 8

func (p *publisher) wasRejected(seq uint64) bool {
	for _, r := range p.rejected {
		if seq >= r.from && seq < r.to {
			return true
		}
	}
	return false
}

func (p *publisher) reject(seq uint64) {
	if n := len(p.rejected); n > 0 && p.rejected[n-1].to == seq {
		p.rejected[n-1].to++
		return
	}
	if len(p.rejected) == maxRejectedRanges {
		p.rejected = append(p.rejected[:0], p.rejected[1:]...)
	}
	p.rejected = append(p.rejected, seqRange{seq, seq + 1})
}

// enqueue stores a published message, keeping only its fixed-size record;
// the message itself stays in the log entry at index. A tracked
// publisher's publish is stored only if it is the next in the publisher's
// sequence (publishers.sequence).
func (m *Machine) enqueue(index uint64, c *Command) {
	var p publisher
	tracked := c.Publisher != 0
	if tracked {
		var answer Effect
		var next bool
		if p, answer, next = m.publishers.sequence(c); !next {
			m.emit(answer)
			return
		}
	}
	// x-overflow=reject-publish refuses a message that would take the
	// queue over its limits. RabbitMQ's quorum queues tell publishers to
	// start refusing once the queue is over, and so may overshoot by the
	// messages in flight (quorum queue guide, "Length Limit"); deciding here
	// in the log keeps the limit exact.
	if m.cfg.Overflow == RejectPublish && m.overLimit(1, int64(c.Size)) {
		if tracked {
			p.reject(c.Seq)
			m.publishers[c.Publisher] = p
			m.emit(Effect{Kind: EffectReject, Publisher: c.Publisher, Seq: c.Seq})
		}
		return
	}
	x := msg{index: index, size: c.Size, priority: m.cfg.priorityOf(c)}
	// The message expires after the lower of x-message-ttl and its own
	// expiration (rabbit_fifo maybe_set_msg_ttl/4). A TTL of 0 expires it
	// a millisecond later: it can still go to a consumer waiting now, not
	// to one that comes later (update_expiry_header/3).
	ttl := m.cfg.MessageTTL
	if c.HasTTL && (ttl < 0 || c.TTL < ttl) {
		ttl = c.TTL
	}
	if ttl >= 0 {
		x.expiry = addSat(m.clock, max(ttl, 1))
	}
	m.ready.pushFresh(x)
	if tracked {
		m.publishers[c.Publisher] = p
		m.emit(Effect{Kind: EffectConfirm, Publisher: c.Publisher, Seq: c.Seq})
	}
}
