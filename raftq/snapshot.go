package raftq

import (
	"encoding/binary"
	"errors"
	"slices"
)

// Snapshot format. The header is a magic string and a version; a reader
// refuses versions it does not know. Version 1 follows the header with the
// Config, the scalar state, then the publishers and consumers in ID order
// (each consumer with its checked-out messages in delivery order), the
// lineup's lines, the ready messages in serving order and the at-least-once
// dead letters in dead-lettering order. Version 2 adds, at the end, the
// messages waiting out a delayed retry, in the order they become ready,
// each with its time. Version 3 adds the machine version (version.go)
// right after the header; it is written only from machine version 2 on,
// so that a queue still at version 1 writes snapshots that builds without
// machine versions read (version 2 reads as machine version 1, version 1
// too). Integers are varints. The same state always gives
// the same bytes, and the size is proportional to the number of messages
// and consumers: message bodies are never in it.
const (
	snapshotMagic   = "WARRENQQ"
	snapshotVersion = 3
)

// ErrSnapshot is wrapped by every Restore error.
var ErrSnapshot = errors.New("raftq: bad snapshot")

// AppendSnapshot encodes the machine's whole state onto dst: the header,
// then one section per part, in the order the format above lists them.
func (m *Machine) AppendSnapshot(dst []byte) []byte {
	w := writer{b: dst}
	w.b = append(w.b, snapshotMagic...)
	if m.version < VersionSuspend {
		w.uvarint(2)
	} else {
		w.uvarint(3)
		w.uvarint(uint64(m.version))
	}
	w.config(&m.cfg)
	w.uvarint(m.lastIndex)
	w.varint(m.clock)
	w.varint(m.lastActive)
	w.bool(m.deleteRequested)
	w.uvarint(m.checkouts.deliveries)
	w.publishers(m.publishers)
	w.consumers(&m.consumers, &m.checkouts)
	w.lineup(&m.consumers.lineup)
	w.ready(&m.ready)
	w.deadLetters(&m.dead)
	w.delayed(&m.delayed)
	return w.b
}

// publishers writes the publishers in ID order, each with its refused
// ranges.
func (w *writer) publishers(ps publishers) {
	ids := make([]uint64, 0, len(ps))
	for id := range ps {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	w.uvarint(uint64(len(ids)))
	for _, id := range ids {
		p := ps[id]
		w.uvarint(id)
		w.uvarint(p.next)
		w.uvarint(uint64(len(p.rejected)))
		for _, r := range p.rejected {
			w.uvarint(r.from)
			w.uvarint(r.to)
		}
	}
}

// consumers writes the consumer records in ID order, each with its
// checked-out messages in delivery order, then the single active
// consumer's ID plus one (0 for none).
func (w *writer) consumers(cs *consumers, k *checkouts) {
	sorted := cs.sorted()
	w.uvarint(uint64(len(sorted)))
	for _, c := range sorted {
		w.uvarint(uint64(c.id))
		w.uvarint(c.since)
		var flags byte
		for i, f := range []bool{c.getter, c.attached, c.exclusive, c.quiescing, c.suspended} {
			if f {
				flags |= 1 << i
			}
		}
		w.b = append(w.b, flags)
		w.uvarint(uint64(c.prefetch))
		w.varint(int64(c.priority))
		w.varint(c.timeout)
		w.varint(c.lastDeadline)
		w.uvarint(uint64(c.held))
		for i := 0; i < c.order.len(); i++ {
			d := *c.order.at(i)
			if !k.live(c, d) {
				continue
			}
			h := k.held[d.index]
			w.msg(&h.msg)
			w.varint(h.deadline)
			w.uvarint(h.seq)
		}
	}
	if cs.active != nil {
		w.uvarint(uint64(cs.active.id) + 1)
	} else {
		w.uvarint(0)
	}
}

// lineup writes each level's priority and the IDs standing in its line,
// in turn order. Which level a consumer belongs to follows from its
// record; only the lines' order is not.
func (w *writer) lineup(l *lineup) {
	w.uvarint(uint64(len(l.levels)))
	for _, lv := range l.levels {
		w.varint(int64(lv.priority))
		w.uvarint(uint64(lv.line.len()))
		for i := 0; i < lv.line.len(); i++ {
			w.uvarint(uint64((*lv.line.at(i)).id))
		}
	}
}

// ready writes the ready messages in serving order: the returns, then
// each non-empty level from the highest priority down.
func (w *writer) ready(r *ready) {
	w.uvarint(uint64(r.returns.len()))
	for i := 0; i < r.returns.len(); i++ {
		w.msg(r.returns.at(i))
	}
	w.uvarint(uint64(bitsSet(r.nonEmpty)))
	for p := maxPriority; p >= 0; p-- {
		lv := &r.levels[p]
		if lv.len() == 0 {
			continue
		}
		w.b = append(w.b, byte(p))
		w.uvarint(uint64(lv.len()))
		for i := 0; i < lv.len(); i++ {
			w.msg(lv.at(i))
		}
	}
}

// deadLetters writes the at-least-once dead letters in dead-lettering
// order.
func (w *writer) deadLetters(d *deadLetters) {
	w.uvarint(uint64(len(d.byIndex)))
	d.each(func(x *deadLetter) {
		w.msg(&x.msg)
		w.b = append(w.b, byte(x.reason))
		w.varint(x.time)
	})
}

// delayed writes the messages waiting out a delayed retry, in the order
// they become ready, each with its time (snapshot version 2 on).
func (w *writer) delayed(d *delayed) {
	w.uvarint(uint64(len(d.q)))
	for i := range d.q {
		w.varint(d.q[i].at)
		w.msg(&d.q[i].x)
	}
}

func bitsSet(x uint32) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

type writer struct{ b []byte }

func (w *writer) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *writer) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *writer) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}
func (w *writer) string(s string) {
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *writer) msg(x *msg) {
	w.uvarint(x.index)
	w.varint(x.expiry)
	w.uvarint(uint64(x.size))
	w.uvarint(uint64(x.delivery))
	w.uvarint(uint64(x.acquired))
	w.b = append(w.b, x.priority)
}

func (w *writer) config(c *Config) {
	w.varint(c.DeliveryLimit)
	var flags byte
	// Bit 4 says a delayed retry follows the other fields: a record
	// without it reads as it did before delayed retries existed (in old
	// snapshots and UpdateConfig entries alike).
	retry := c.Retry.Type != RetryDisabled
	for i, f := range []bool{c.DeadLettering, c.HasDeadLetterRoutingKey, c.SingleActiveConsumer, c.ConsumerTimeoutSet, retry} {
		if f {
			flags |= 1 << i
		}
	}
	w.b = append(w.b, flags, byte(c.Strategy), byte(c.Overflow))
	w.string(c.DeadLetterExchange)
	w.string(c.DeadLetterRoutingKey)
	w.varint(c.MessageTTL)
	w.varint(c.MaxLength)
	w.varint(c.MaxLengthBytes)
	w.varint(c.Expires)
	w.varint(c.ConsumerTimeout)
	if retry {
		w.b = append(w.b, byte(c.Retry.Type))
		w.varint(c.Retry.Min)
		w.varint(c.Retry.Max)
	}
}

// config reads writer.config's record: in a snapshot and in an
// UpdateConfig entry alike. It refuses what no ParseConfig could give, so
// a corrupt record cannot make, say, a negative consumer timeout that a
// later snapshot would refuse.
func (d *decoder) config() Config {
	var c Config
	c.DeliveryLimit = d.varint()
	flags := d.flags(0b11111)
	c.DeadLettering = flags&1 != 0
	c.HasDeadLetterRoutingKey = flags&2 != 0
	c.SingleActiveConsumer = flags&4 != 0
	c.ConsumerTimeoutSet = flags&8 != 0
	c.Strategy = Strategy(d.byte())
	c.Overflow = Overflow(d.byte())
	if d.err == nil && (c.Strategy > AtLeastOnce || c.Overflow > RejectPublish) {
		d.fail("bad strategy or overflow")
	}
	c.DeadLetterExchange = d.string()
	c.DeadLetterRoutingKey = d.string()
	c.MessageTTL = d.varint()
	c.MaxLength = d.varint()
	c.MaxLengthBytes = d.varint()
	c.Expires = d.varint()
	c.ConsumerTimeout = d.varint()
	if d.err == nil && (min(c.MessageTTL, c.MaxLength, c.MaxLengthBytes, c.Expires) < Unset || c.ConsumerTimeout < 0) {
		d.fail("bad limits in config")
	}
	if flags&16 != 0 {
		c.Retry = DelayedRetry{Type: RetryType(d.byte()), Min: d.varint(), Max: d.varint()}
		if d.err == nil && (c.Retry.Type == RetryDisabled || c.Retry.Type > RetryReturned || c.Retry.Min <= 0 || c.Retry.Max <= 0) {
			d.fail("bad delayed retry in config")
		}
	}
	return c
}
