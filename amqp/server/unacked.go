package server

import (
	"sort"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/raftq/queue"
)

// unackedList is a channel's unsettled deliveries in delivery-tag order.
// Tags only grow, so appending keeps it sorted; settled entries become
// tombstones that are dropped once they reach the head. The common case,
// acks in order, is O(1).
type unackedList struct {
	entries []unackedEntry
	head    int
	live    int
	counted int // live entries that count against a global prefetch
}

type unackedEntry struct {
	tag     uint64
	q       *broker.Queue
	id      uint64
	settled bool
	counted bool // a consumer's delivery, limited by a global prefetch
}

func (l *unackedList) add(tag uint64, q *broker.Queue, id uint64, counted bool) {
	l.entries = append(l.entries, unackedEntry{tag: tag, q: q, id: id, counted: counted})
	l.live++
	if counted {
		l.counted++
	}
}

func (l *unackedList) len() int { return l.live }

// take moves the deliveries an ack, nack or reject names into b. tag 0
// with multiple means all. It returns false if the tag names nothing
// unsettled (406 "unknown delivery tag").
func (l *unackedList) take(tag uint64, multiple bool, b *settleBatch) bool {
	return l.collect(tag, multiple, func(e unackedEntry) { b.add(e.q, e.id) })
}

// takeEntries is take for a transaction: the entries themselves are
// appended to out, to be settled at commit or restored at rollback.
func (l *unackedList) takeEntries(tag uint64, multiple bool, out []unackedEntry) ([]unackedEntry, bool) {
	ok := l.collect(tag, multiple, func(e unackedEntry) { out = append(out, e) })
	return out, ok
}

// restore puts entries taken by takeEntries back, in tag order (a
// transaction rolled back: its acks are undone).
func (l *unackedList) restore(entries []unackedEntry) {
	if len(entries) == 0 {
		return
	}
	merged := make([]unackedEntry, 0, l.live+len(entries))
	for _, e := range l.entries[l.head:] {
		if !e.settled {
			merged = append(merged, e)
		}
	}
	for _, e := range entries {
		e.settled = false
		merged = append(merged, e)
		l.live++
		if e.counted {
			l.counted++
		}
	}
	sort.Slice(merged, func(i, j int) bool { return merged[i].tag < merged[j].tag })
	l.entries = merged
	l.head = 0
}

func (l *unackedList) collect(tag uint64, multiple bool, fn func(unackedEntry)) bool {
	es := l.entries[l.head:]
	i := sort.Search(len(es), func(i int) bool { return es[i].tag >= tag })
	// The named tag itself must be unsettled, with multiple too: RabbitMQ
	// (collect_acks) refuses "up to N" when N is unknown or already
	// settled, and then settles nothing. Tag 0 with multiple means all.
	found := i < len(es) && es[i].tag == tag && !es[i].settled
	if multiple {
		if tag == 0 {
			i = len(es) - 1
		} else if !found {
			return false
		}
		for j := 0; j <= i; j++ {
			if e := &es[j]; !e.settled {
				l.settle(e, fn)
			}
		}
		l.compact()
		return true
	}
	if !found {
		return false
	}
	l.settle(&es[i], fn)
	l.compact()
	return true
}

// takeAll moves every unsettled delivery into b.
func (l *unackedList) takeAll(b *settleBatch) {
	for i := l.head; i < len(l.entries); i++ {
		if e := &l.entries[i]; !e.settled {
			l.settle(e, func(e unackedEntry) { b.add(e.q, e.id) })
		}
	}
	l.compact()
}

func (l *unackedList) settle(e *unackedEntry, fn func(unackedEntry)) {
	e.settled = true
	l.live--
	if e.counted {
		l.counted--
	}
	fn(*e)
	e.q = nil
}

func (l *unackedList) compact() {
	for l.head < len(l.entries) && l.entries[l.head].settled {
		l.head++
	}
	if l.head == len(l.entries) {
		l.entries = l.entries[:0]
		l.head = 0
		return
	}
	if l.head > 1024 && l.head > len(l.entries)/2 {
		n := copy(l.entries, l.entries[l.head:])
		clear(l.entries[n:])
		l.entries = l.entries[:n]
		l.head = 0
	}
}

// settleBatch groups message IDs by queue so that each queue is called
// once per ack, however many deliveries it covers.
type settleBatch struct {
	groups []settleGroup
}

type settleGroup struct {
	q   *broker.Queue
	ids []uint64
}

func (b *settleBatch) add(q *broker.Queue, id uint64) {
	for i := range b.groups {
		if b.groups[i].q == q {
			b.groups[i].ids = append(b.groups[i].ids, id)
			return
		}
	}
	b.groups = append(b.groups, settleGroup{q: q, ids: []uint64{id}})
}

func (b *settleBatch) each(fn func(q queue.Queue, ids []uint64)) {
	for i := range b.groups {
		g := &b.groups[i]
		fn(g.q.Engine(), g.ids)
		g.q, g.ids = nil, nil
	}
	b.groups = b.groups[:0]
}

// count is the deliveries b holds.
func (b *settleBatch) count() int {
	n := 0
	for _, g := range b.groups {
		n += len(g.ids)
	}
	return n
}

// ackSettled acknowledges the deliveries the channel's settle batch holds,
// counting them.
func (ch *channel) ackSettled() {
	ch.c.stats.add(cAcknowledged, uint64(ch.settle.count()))
	ch.settle.ack()
}

func (b *settleBatch) ack() {
	b.each(func(q queue.Queue, ids []uint64) { q.Settle(ids) })
}

func (b *settleBatch) requeue(cause queue.ReturnCause) {
	b.each(func(q queue.Queue, ids []uint64) { q.Requeue(ids, cause) })
}

func (b *settleBatch) discard(cause queue.ReturnCause) {
	b.each(func(q queue.Queue, ids []uint64) { q.Discard(ids, cause) })
}
