package wal

// A replica checks, before raft starts on its state, that its log holds
// what its latest snapshot and raft's replay will ask for (raftq/replica's
// integrity.go). These questions are answered from the in-memory index,
// reading nothing from disk, so that checking costs nothing per entry.

// Has reports whether the group holds entry index.
func (h *Group) Has(index uint64) bool {
	h.l.mu.RLock()
	defer h.l.mu.RUnlock()
	if h.g.dropped {
		return false
	}
	_, ok := h.g.find(index)
	return ok
}

// FirstGap returns the first index in [from, to] the group holds no entry
// for, and whether there is one.
func (h *Group) FirstGap(from, to uint64) (uint64, bool) {
	if from > to {
		return 0, false
	}
	h.l.mu.RLock()
	defer h.l.mu.RUnlock()
	if h.g.dropped {
		return from, true
	}
	k := h.g.search(from)
	if k == len(h.g.runs) || h.g.runs[k].first > from {
		return from, true
	}
	// Runs never touch: the one holding from ends before the next gap.
	if last := h.g.runs[k].last(); last < to {
		return last + 1, true
	}
	return 0, false
}
