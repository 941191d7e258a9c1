package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// history is what the clients saw: every message published (each with its
// own ID, never republished), which of them the broker confirmed, and
// every delivery. The checker judges the broker from it alone.
type history struct {
	mu        sync.Mutex
	next      uint64
	confirmed map[uint64]bool // every ID handed out is a key; true once acked
	queue     map[uint64]string
	delivered map[uint64]*deliveries
}

// deliveries is one message's deliveries: how many, and how many of them
// carried the redelivered flag.
type deliveries struct {
	n, redelivered int
}

func newHistory() *history {
	return &history{confirmed: make(map[uint64]bool), queue: make(map[uint64]string), delivered: make(map[uint64]*deliveries)}
}

// publish hands out the next message ID, recorded as attempted to queue.
func (h *history) publish(queue string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.confirmed[h.next] = false
	h.queue[h.next] = queue
	return h.next
}

func (h *history) confirm(id uint64) {
	h.mu.Lock()
	h.confirmed[id] = true
	h.mu.Unlock()
}

func (h *history) deliver(id uint64, redelivered bool) {
	h.mu.Lock()
	d := h.delivered[id]
	if d == nil {
		d = &deliveries{}
		h.delivered[id] = d
	}
	d.n++
	if redelivered {
		d.redelivered++
	}
	h.mu.Unlock()
}

// deliveredCount is the number of deliveries so far, for telling when the
// queues have stopped handing out messages.
func (h *history) deliveredCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, d := range h.delivered {
		n += d.n
	}
	return n
}

// verdict is the checker's judgement of a history.
type verdict struct {
	Attempted int `json:"attempted"`
	Confirmed int `json:"confirmed"`
	// Delivered counts distinct messages delivered; Deliveries every
	// delivery.
	Delivered  int `json:"delivered"`
	Deliveries int `json:"deliveries"`
	// Indeterminate publishes were neither confirmed nor refused for
	// certain (nacked, or their channel closed first); delivering them
	// or not are both correct. IndeterminateDelivered says how many were.
	Indeterminate          int `json:"indeterminate"`
	IndeterminateDelivered int `json:"indeterminate_delivered"`
	// Redelivered messages came more than once, every later time flagged
	// redelivered: at-least-once delivery after a consumer or its node
	// went away before acking.
	Redelivered int `json:"redelivered"`
	// Lost were confirmed and never delivered; Unexpected were delivered
	// and never published; Unflagged came again without the redelivered
	// flag. Each is a defect.
	Lost []uint64 `json:"lost"`
	// LostByQueue counts the lost messages of each queue.
	LostByQueue map[string]int `json:"lost_by_queue,omitempty"`
	Unexpected  []uint64       `json:"unexpected"`
	Unflagged   []uint64       `json:"unflagged"`
}

func (v verdict) ok() bool {
	return len(v.Lost) == 0 && len(v.Unexpected) == 0 && len(v.Unflagged) == 0
}

// check judges the history, once every client has stopped.
func (h *history) check() verdict {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := verdict{Attempted: len(h.confirmed), Delivered: len(h.delivered)}
	for id, ok := range h.confirmed {
		d := h.delivered[id]
		switch {
		case ok:
			v.Confirmed++
			if d == nil {
				v.Lost = append(v.Lost, id)
				if v.LostByQueue == nil {
					v.LostByQueue = make(map[string]int)
				}
				v.LostByQueue[h.queue[id]]++
			}
		default:
			v.Indeterminate++
			if d != nil {
				v.IndeterminateDelivered++
			}
		}
	}
	for id, d := range h.delivered {
		v.Deliveries += d.n
		if _, ok := h.confirmed[id]; !ok {
			v.Unexpected = append(v.Unexpected, id)
		}
		if d.n > 1 {
			// The first delivery is unflagged; every later one must say
			// it is a redelivery.
			if d.redelivered < d.n-1 {
				v.Unflagged = append(v.Unflagged, id)
			} else {
				v.Redelivered++
			}
		}
	}
	for _, ids := range [][]uint64{v.Lost, v.Unexpected, v.Unflagged} {
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	}
	return v
}

func (v verdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "published %d: confirmed %d, indeterminate %d (%d of them delivered)\n",
		v.Attempted, v.Confirmed, v.Indeterminate, v.IndeterminateDelivered)
	fmt.Fprintf(&b, "delivered %d distinct messages in %d deliveries; %d redelivered (flagged)\n",
		v.Delivered, v.Deliveries, v.Redelivered)
	fmt.Fprintf(&b, "lost (confirmed, never delivered): %d%s\n", len(v.Lost), sample(v.Lost))
	if len(v.LostByQueue) > 0 {
		fmt.Fprintf(&b, "  by queue: %v\n", v.LostByQueue)
	}
	fmt.Fprintf(&b, "unexpected (delivered, never published): %d%s\n", len(v.Unexpected), sample(v.Unexpected))
	fmt.Fprintf(&b, "unflagged redeliveries: %d%s", len(v.Unflagged), sample(v.Unflagged))
	return b.String()
}

// sample lists the first few IDs of a non-empty list.
func sample(ids []uint64) string {
	if len(ids) == 0 {
		return ""
	}
	var s []string
	for i, id := range ids {
		if i == 10 {
			s = append(s, "…")
			break
		}
		s = append(s, fmt.Sprint(id))
	}
	return " (" + strings.Join(s, " ") + ")"
}
