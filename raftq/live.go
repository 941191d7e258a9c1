package raftq

import "slices"

// AppendLiveIndexes appends, in ascending order, the log index of every
// message the queue still references: ready, waiting out a delayed retry,
// checked out, or awaiting at-least-once dead-lettering. The log store keeps these entries (and the
// recent tail) and may delete every other entry below a snapshot.
//
// The priority levels are each in index order already and are merged; the
// returned, checked-out and dead-lettered messages, usually few, are
// sorted. The cost is proportional to the live messages.
func (m *Machine) AppendLiveIndexes(dst []uint64) []uint64 {
	start := len(dst)
	r := &m.ready
	for i := 0; i < r.returns.len(); i++ {
		dst = append(dst, r.returns.at(i).index)
	}
	for i := range m.checkouts.held {
		dst = append(dst, i)
	}
	for i := range m.dead.byIndex {
		dst = append(dst, i)
	}
	for _, w := range m.delayed.q {
		dst = append(dst, w.x.index)
	}
	slices.Sort(dst[start:])
	// Merge the levels in, one at a time, back to front so nothing is
	// overwritten before it is read.
	for p := range r.levels {
		lv := &r.levels[p]
		if lv.len() == 0 {
			continue
		}
		n := len(dst) - start
		dst = slices.Grow(dst, lv.len())[:len(dst)+lv.len()]
		i, j, k := start+n-1, lv.len()-1, len(dst)-1
		for j >= 0 {
			if v := lv.at(j).index; i < start || dst[i] < v {
				dst[k] = v
				j--
			} else {
				dst[k] = dst[i]
				i--
			}
			k--
		}
	}
	return dst
}

// SmallestLiveIndex is the lowest index AppendLiveIndexes would list; ok is
// false when the queue references no message.
func (m *Machine) SmallestLiveIndex() (index uint64, ok bool) {
	least := func(i uint64) {
		if !ok || i < index {
			index, ok = i, true
		}
	}
	r := &m.ready
	for p := range r.levels {
		if r.levels[p].len() > 0 {
			least(r.levels[p].peek().index)
		}
	}
	for i := 0; i < r.returns.len(); i++ {
		least(r.returns.at(i).index)
	}
	for i := range m.checkouts.held {
		least(i)
	}
	for i := range m.dead.byIndex {
		least(i)
	}
	for _, w := range m.delayed.q {
		least(w.x.index)
	}
	return index, ok
}
