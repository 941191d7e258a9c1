package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// queueDefects counts one queue's defects: a post-mortem starts from the
// queue's leader and members, so the verdict names the queues concerned.
type queueDefects struct {
	Lost       int `json:"lost,omitempty"`
	Unexpected int `json:"unexpected,omitempty"`
	Duplicated int `json:"duplicated,omitempty"`
	Unflagged  int `json:"unflagged,omitempty"`
	Misrouted  int `json:"misrouted,omitempty"`
	Corrupted  int `json:"corrupted,omitempty"`
	Reordered  int `json:"reordered,omitempty"`
	Stranded   int `json:"stranded,omitempty"`
}

func (d queueDefects) String() string {
	var parts []string
	for _, c := range []struct {
		name string
		n    int
	}{{"lost", d.Lost}, {"unexpected", d.Unexpected}, {"duplicated", d.Duplicated}, {"unflagged", d.Unflagged},
		{"misrouted", d.Misrouted}, {"corrupted", d.Corrupted}, {"reordered", d.Reordered}, {"stranded", d.Stranded}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c.name, c.n))
		}
	}
	return strings.Join(parts, ", ")
}

// queue is q's defect counts, made on first use.
func (v *verdict) queue(q string) *queueDefects {
	if v.ByQueue == nil {
		v.ByQueue = map[string]*queueDefects{}
	}
	d := v.ByQueue[q]
	if d == nil {
		d = &queueDefects{}
		v.ByQueue[q] = d
	}
	return d
}

// countByQueue counts the messages' defects by queue: the queue published
// to, or for a message never published the queue it was delivered from,
// or for a corrupted one the queue of its first corrupt delivery. The
// caller holds h.mu.
func (h *history) countByQueue(v *verdict) {
	published := func(id uint64) string {
		r := h.msgs[id]
		if r.queue == "" && len(r.deliveries) > 0 {
			return r.deliveries[0].queue
		}
		return r.queue
	}
	for _, c := range []struct {
		ids   []uint64
		count func(d *queueDefects) *int
	}{
		{v.Lost, func(d *queueDefects) *int { return &d.Lost }},
		{v.Unexpected, func(d *queueDefects) *int { return &d.Unexpected }},
		{v.Duplicated, func(d *queueDefects) *int { return &d.Duplicated }},
		{v.Unflagged, func(d *queueDefects) *int { return &d.Unflagged }},
		{v.Misrouted, func(d *queueDefects) *int { return &d.Misrouted }},
		{v.Reordered, func(d *queueDefects) *int { return &d.Reordered }},
	} {
		for _, id := range c.ids {
			(*c.count(v.queue(published(id))))++
		}
	}
	for _, id := range v.Corrupted {
		r := h.msgs[id]
		i := slices.IndexFunc(r.deliveries, func(d delivery) bool { return d.corrupt != "" })
		v.queue(r.deliveries[i].queue).Corrupted++
	}
}

// byQueueLines are the queues with a defect, by name, each with its
// counts.
func (v verdict) byQueueLines() []string {
	var lines []string
	for _, q := range slices.Sorted(maps.Keys(v.ByQueue)) {
		if s := v.ByQueue[q].String(); s != "" {
			lines = append(lines, q+": "+s)
		}
	}
	return lines
}
