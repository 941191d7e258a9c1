package classic

// returnedHeap is a binary min-heap of entries by ID. Requeued messages arrive
// in any order (a consumer may nack the newest first, a closing channel hands
// back its whole window) and must leave lowest ID first; a heap does that in
// O(log n) per message, where re-inserting into a sorted queue would cost
// O(queue length). It is hand-written rather than container/heap because
// that boxes every element into an interface, an allocation per push.
type returnedHeap struct {
	items []entry
}

func (h *returnedHeap) len() int { return len(h.items) }

func (h *returnedHeap) push(e entry) {
	h.items = append(h.items, e)
	h.up(len(h.items) - 1)
}

// pop removes the entry with the lowest ID. The heap must not be empty.
func (h *returnedHeap) pop() entry {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items[last] = entry{} // let the garbage collector have the message
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
	if cap(h.items) > minRingCap && len(h.items) <= cap(h.items)/4 {
		h.items = append([]entry(nil), h.items...)
	}
	return top
}

// each calls f on every entry, in no particular order.
func (h *returnedHeap) each(f func(entry)) {
	for _, e := range h.items {
		f(e)
	}
}

func (h *returnedHeap) reset() { h.items = nil }

func (h *returnedHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h.items[parent].id <= h.items[i].id {
			return
		}
		h.items[parent], h.items[i] = h.items[i], h.items[parent]
		i = parent
	}
}

func (h *returnedHeap) down(i int) {
	n := len(h.items)
	for {
		least := i
		if l := 2*i + 1; l < n && h.items[l].id < h.items[least].id {
			least = l
		}
		if r := 2*i + 2; r < n && h.items[r].id < h.items[least].id {
			least = r
		}
		if least == i {
			return
		}
		h.items[least], h.items[i] = h.items[i], h.items[least]
		i = least
	}
}
