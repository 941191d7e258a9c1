package main

import (
	"cmp"
	"slices"
)

// Order is promised where RabbitMQ promises it: messages published on one
// channel to one queue and consumed through one channel arrive in the order
// published. A queue with a single active consumer has one consuming
// channel at a time, so its first deliveries follow each publishing
// channel's order, across hand-overs from one consumer to the next.
// Redeliveries are exempt: a message returned by a consumer that went away
// comes again, flagged redelivered, after later ones (RabbitMQ's
// documentation on message ordering says the same of requeued messages).

// firstDelivery is an unflagged first delivery of a message of an ordered
// queue, for the order check.
type firstDelivery struct {
	id      uint64
	channel string
	seq     uint64
	d       delivery
}

// checkOrder finds, on the queues that promise order (expect.Ordered),
// every message whose first delivery, unflagged, came after the first
// delivery of a message published later on the same channel. It returns,
// for each such message, the message that came before it. The caller
// holds h.mu.
func (h *history) checkOrder(v *verdict) (overtaken map[uint64]uint64) {
	overtaken = map[uint64]uint64{}
	for _, q := range h.expect.Ordered {
		var firsts []firstDelivery
		for id, r := range h.msgs {
			if r.queue != q {
				continue
			}
			for i, d := range r.deliveries {
				if d.redelivered || i > 0 {
					v.Exercised.OrderExempt++
				}
			}
			if r.channel == "" || len(r.deliveries) == 0 {
				continue
			}
			if d := r.deliveries[0]; d.queue == q && !d.redelivered {
				firsts = append(firsts, firstDelivery{id: id, channel: r.channel, seq: d.seq, d: d})
			}
		}
		// The clients' own order of taking deliveries; the time for a
		// history without one.
		slices.SortFunc(firsts, func(a, b firstDelivery) int {
			return cmp.Or(cmp.Compare(a.seq, b.seq), a.d.at.Compare(b.d.at), cmp.Compare(a.id, b.id))
		})
		// IDs grow in publish order on a channel (each producer hands
		// them out as it publishes), so the highest ID taken so far on
		// each channel is the latest published.
		latest := map[string]uint64{}
		for _, f := range firsts {
			v.Exercised.Ordered++
			if last := latest[f.channel]; f.id < last {
				v.Reordered = append(v.Reordered, f.id)
				overtaken[f.id] = last
				continue
			}
			latest[f.channel] = f.id
		}
	}
	return overtaken
}
