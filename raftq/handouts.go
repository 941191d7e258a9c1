package raftq

// Handouts gives every hand-out of a message (a delivery or a basic.get)
// an ID of its own, the queue.Delivery.ID the channel settles by, and
// remembers which message and consumer it stands for: the queue boundary
// settles by delivery, the machine by consumer and message. A message
// handed out again gets a new ID, so a late settle of an earlier delivery
// (one a consumer timeout took back) names its old consumer and changes
// nothing. Runtime bookkeeping, not machine state; not safe for concurrent
// use.
type Handouts struct {
	next uint64
	byID map[uint64]handout
}

type handout struct {
	index    uint64
	consumer ConsumerID
}

// StartAt makes the next delivery ID base+1. A replicated queue's members
// start at random bases, so that IDs handed out by one leader are never
// mistaken for those of the next.
func (h *Handouts) StartAt(base uint64) { h.next = base }

// Clear forgets every delivery; IDs keep rising.
func (h *Handouts) Clear() { h.byID = nil }

// Add records that message index went to consumer and returns the
// delivery's ID.
func (h *Handouts) Add(index uint64, consumer ConsumerID) uint64 {
	if h.byID == nil {
		h.byID = make(map[uint64]handout)
	}
	h.next++
	h.byID[h.next] = handout{index: index, consumer: consumer}
	return h.next
}

// Take forgets the deliveries ids and returns their message IDs grouped by
// consumer, the consumers in the order they first appear. Unknown IDs are
// skipped.
func (h *Handouts) Take(ids []uint64) (order []ConsumerID, groups map[ConsumerID][]uint64) {
	groups = make(map[ConsumerID][]uint64, 1)
	for _, id := range ids {
		x, ok := h.byID[id]
		if !ok {
			continue
		}
		delete(h.byID, id)
		if _, seen := groups[x.consumer]; !seen {
			order = append(order, x.consumer)
		}
		groups[x.consumer] = append(groups[x.consumer], x.index)
	}
	return order, groups
}

// Reset forgets every delivery.
func (h *Handouts) Reset() { h.byID = nil }
