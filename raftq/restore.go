package raftq

import (
	"fmt"
	"slices"
)

// Restore builds a machine from AppendSnapshot's bytes. It checks the
// snapshot's consistency and refuses (with an error wrapping ErrSnapshot)
// anything it cannot trust, rather than panicking later.
func Restore(data []byte) (m *Machine, err error) {
	d := decoder{b: data}
	if len(data) < len(snapshotMagic) || string(data[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%w: no snapshot header", ErrSnapshot)
	}
	d.off = len(snapshotMagic)
	v := d.uvarint()
	if d.err == nil && (v < 1 || v > snapshotVersion) {
		return nil, fmt.Errorf("%w: version %d, this build reads 1 to %d", ErrSnapshot, v, snapshotVersion)
	}
	r := restorer{decoder: d, version: v}
	m = r.machine()
	if r.err == nil && r.off != len(r.b) {
		r.fail("%d trailing bytes", len(r.b)-r.off)
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSnapshot, r.err)
	}
	return m, nil
}

type restorer struct {
	decoder
	version uint64 // the snapshot's format version
	// indexes collects every message's index as it is read: every message
	// must be in exactly one place, checked for duplicates at the end (a
	// sorted slice costs 8 bytes a message where a set would cost several
	// times that).
	indexes []uint64
}

// count reads a length, refusing one that cannot fit in what remains
// (every element takes at least min bytes), so a corrupt length cannot make
// Restore allocate without bound.
func (r *restorer) count(min int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64((len(r.b)-r.off)/min) {
		r.fail("count %d larger than the snapshot", n)
		return 0
	}
	return int(n)
}

func (r *restorer) bool() bool {
	b := r.byte()
	if r.err == nil && b > 1 {
		r.fail("bad bool %d", b)
	}
	return b == 1
}

func (r *restorer) msg() msg {
	x := msg{index: r.uvarint(), expiry: r.varint(), size: r.uint32(), delivery: r.uint32(), acquired: r.uint32(), priority: r.byte()}
	if r.err == nil && (x.index == 0 || x.priority > maxPriority || x.expiry < 0) {
		r.fail("bad message record %+v", x)
	}
	return x
}

// machine reads the sections in the order AppendSnapshot writes them; each
// step checks its section against what is already read, so a step may
// rely on the ones before it (the lineup on the consumers, say).
func (r *restorer) machine() *Machine {
	version := r.machineVersion()
	m := New(r.config(), 0)
	m.version = version
	m.lastIndex = r.uvarint()
	m.clock = r.varint()
	m.lastActive = r.varint()
	m.deleteRequested = r.bool()
	m.checkouts.deliveries = r.uvarint()
	r.publishers(m.publishers)
	r.consumers(m)
	r.active(&m.consumers)
	r.lineup(&m.consumers)
	r.ready(&m.ready)
	r.deadLetters(&m.dead)
	if r.version >= 2 {
		r.delayed(&m.delayed)
	}
	r.placedOnce(m.lastIndex)
	return m
}

// machineVersion reads the machine version, which snapshots carry from
// snapshot version 3 on; before, the queue ran version 1.
func (r *restorer) machineVersion() uint32 {
	version := uint64(1)
	if r.version >= 3 {
		version = r.uvarint()
		if r.err == nil && (version < VersionSuspend || version > MachineVersion) {
			r.fail("machine version %d, this build applies 1 to %d", version, MachineVersion)
		}
	}
	return uint32(version)
}

// placed notes that message i has a place; placedOnce checks them all.
func (r *restorer) placed(i uint64) { r.indexes = append(r.indexes, i) }

// placedOnce checks that no message is in two places, and none is after
// the last applied index.
func (r *restorer) placedOnce(lastIndex uint64) {
	if r.err != nil {
		return
	}
	all := r.indexes
	slices.Sort(all)
	for i, x := range all {
		if (i > 0 && all[i-1] == x) || x > lastIndex {
			r.fail("message %d twice, or after the last index %d", x, lastIndex)
			break
		}
	}
}

func (r *restorer) publishers(ps publishers) {
	for n, i := r.count(2), 0; i < n && r.err == nil; i++ {
		id := r.uvarint()
		var p publisher
		p.next = r.uvarint()
		nr := r.count(2)
		for j := 0; j < nr && r.err == nil; j++ {
			p.rejected = append(p.rejected, seqRange{r.uvarint(), r.uvarint()})
		}
		if _, dup := ps[id]; dup || nr > maxRejectedRanges {
			r.fail("bad publisher %d", id)
		}
		if r.err != nil {
			break
		}
		ps[id] = p
	}
}

// consumers reads the consumer records with their checked-out messages,
// and rebuilds what follows from the records: the attached count, the
// exclusive consumer and, without single active consumer, the lineup's
// levels (their lines come in the lineup section).
func (r *restorer) consumers(m *Machine) {
	cs := &m.consumers
	for n, i := r.count(8), 0; i < n && r.err == nil; i++ {
		c, nheld := r.consumer(m)
		if r.err != nil {
			break
		}
		cs.byID[c.id] = c
		r.checkedOut(&m.checkouts, c, nheld)
		if c.attached {
			cs.attached++
			if c.exclusive {
				if cs.exclusive != nil {
					r.fail("two exclusive consumers")
				}
				cs.exclusive = c
			}
			if !m.cfg.SingleActiveConsumer {
				cs.lineup.join(c)
			}
		}
	}
	if cs.exclusive != nil && cs.attached > 1 {
		r.fail("an exclusive consumer is not alone")
	}
}

// consumer reads one consumer record, up to the number of messages it
// holds.
func (r *restorer) consumer(m *Machine) (c *consumer, nheld int) {
	c = &consumer{id: ConsumerID(r.uvarint()), since: r.uvarint()}
	flags := r.flags(0b11111)
	c.getter, c.attached, c.exclusive, c.quiescing = flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0
	c.suspended = flags&16 != 0
	c.prefetch = r.uint32()
	p := r.varint()
	c.priority = int32(p)
	c.timeout = r.varint()
	c.lastDeadline = r.varint()
	nheld = r.count(8)
	if r.err == nil && (m.consumers.byID[c.id] != nil || int64(c.priority) != p || c.timeout < 0 ||
		(c.getter && (c.attached || nheld == 0)) || (!c.attached && nheld == 0) || (c.suspended && (!c.attached || m.version < VersionSuspend))) {
		r.fail("bad consumer %d", c.id)
	}
	return c, nheld
}

// checkedOut reads the n messages c holds, in delivery order.
func (r *restorer) checkedOut(k *checkouts, c *consumer, n int) {
	var prevDeadline int64 = -1 << 63
	for j := 0; j < n && r.err == nil; j++ {
		x := r.msg()
		deadline, seq := r.varint(), r.uvarint()
		_, dup := k.handedOut[seq]
		if r.err == nil && (k.held[x.index].owner != nil || seq == 0 || seq > k.deliveries || dup ||
			deadline > c.lastDeadline || deadline < prevDeadline) {
			r.fail("bad checked-out message %d", x.index)
		}
		if r.err != nil {
			break
		}
		prevDeadline = deadline
		r.placed(x.index)
		k.put(c, held{msg: x, owner: c, deadline: deadline, seq: seq})
	}
}

// active reads the single active consumer (its ID plus one, 0 for none).
func (r *restorer) active(cs *consumers) {
	if a := r.uvarint(); a != 0 && r.err == nil {
		c := cs.byID[ConsumerID(a-1)]
		if c == nil || !c.attached || !cs.m.cfg.SingleActiveConsumer {
			r.fail("bad active consumer %d", a-1)
		}
		cs.active = c
	}
	for _, c := range cs.byID {
		if r.err == nil && c.quiescing && c != cs.active {
			r.fail("consumer %d quiescing but not active", c.id)
		}
	}
}

// lineup reads the lines of the levels the consumers made.
func (r *restorer) lineup(cs *consumers) {
	levels := cs.lineup.levels
	if n := r.count(2); r.err == nil && n != len(levels) {
		r.fail("%d lineup levels, consumers make %d", n, len(levels))
	}
	for _, lv := range levels {
		if p := r.varint(); r.err == nil && p != int64(lv.priority) {
			r.fail("lineup level %d, want %d", p, lv.priority)
		}
		for n, i := r.count(1), 0; i < n && r.err == nil; i++ {
			c := cs.byID[ConsumerID(r.uvarint())]
			if c == nil || c.level != lv || c.inLine || !c.canReceive() {
				r.fail("bad consumer in line")
				break
			}
			lv.line.push(c)
			c.inLine = true
		}
	}
	for _, c := range cs.byID {
		if r.err == nil && c.level != nil && !c.inLine && c.canReceive() {
			r.fail("consumer %d can receive but is not in line", c.id)
		}
	}
}

// ready reads the returns, then the non-empty levels from the highest
// priority down, each in index order.
func (r *restorer) ready(rd *ready) {
	for n, i := r.count(6), 0; i < n && r.err == nil; i++ {
		x := r.msg()
		if r.err != nil {
			break
		}
		r.placed(x.index)
		rd.pushReturned(x)
	}
	prev := priorityLevels
	for n, i := r.count(2), 0; i < n && r.err == nil; i++ {
		p := int(r.byte())
		if r.err == nil && p >= prev {
			r.fail("priority level %d out of order", p)
		}
		prev = p
		var last uint64
		for k, j := r.count(6), 0; j < k && r.err == nil; j++ {
			x := r.msg()
			if r.err == nil && (int(x.priority) != p || x.index <= last) {
				r.fail("bad ready message %d", x.index)
			}
			if r.err != nil {
				break
			}
			last = x.index
			r.placed(x.index)
			rd.pushFresh(x)
		}
	}
}

func (r *restorer) deadLetters(d *deadLetters) {
	for n, i := r.count(8), 0; i < n && r.err == nil; i++ {
		x := deadLetter{msg: r.msg(), reason: Reason(r.byte()), time: r.varint()}
		if r.err == nil && (d.byIndex[x.index].index != 0 || x.reason < ReasonRejected || x.reason > ReasonDeliveryLimit) {
			r.fail("bad dead letter %d", x.index)
		}
		if r.err != nil {
			break
		}
		r.placed(x.index)
		d.add(x)
	}
}

// delayed reads the messages waiting out a delayed retry, in the order
// they become ready (snapshot version 2 on).
func (r *restorer) delayed(d *delayed) {
	var prev waiting
	for n, i := r.count(7), 0; i < n && r.err == nil; i++ {
		w := waiting{at: r.varint(), x: r.msg()}
		if r.err == nil && i > 0 && cmpWaiting(prev, w) >= 0 {
			r.fail("delayed message %d out of order", w.x.index)
		}
		if r.err != nil {
			break
		}
		prev = w
		r.placed(w.x.index)
		d.q = append(d.q, w)
		d.bytes += int64(w.x.size)
	}
}
