package server

import (
	"sync"

	"github.com/warrenmq/warren/amqp/wire"
)

// confirmTracker numbers a confirm-mode channel's publishes and turns their
// completions into basic.ack / basic.nack frames, as RabbitMQ's channel
// does: a run of completed publishes at the head of the sequence becomes
// one frame with multiple=true, and a publish that completes while an
// earlier one still waits (another queue, one without a leader for a
// while) is confirmed on its own at once rather than held behind it.
type confirmTracker struct {
	mu      sync.Mutex
	base    uint64        // sequence number of pending[0]
	pending []pendingConf // publishes not yet confirmed in sequence, oldest first
	next    uint64        // last sequence number handed out
	queued  bool          // the channel is already on the writer's list
	// ahead counts the pending publishes already confirmed out of
	// sequence (sent); ready those stored by every queue and not yet
	// confirmed, so that appendConfirms looks past the head of the
	// sequence only when one of them is there.
	ahead, ready int
}

type pendingConf struct {
	remaining int32 // queues yet to store the message
	nack      bool  // some queue refused it
	// sent: confirmed on its own, ahead of an earlier publish.
	sent bool
}

// publish registers the next publish, routed to n queues, and returns its
// sequence number (the delivery tag of its confirm).
func (t *confirmTracker) publish(n int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	if len(t.pending) == 0 {
		t.base = t.next
	}
	t.pending = append(t.pending, pendingConf{remaining: int32(n)})
	if n <= 0 {
		t.ready++ // routed nowhere: nothing to wait for
	}
	return t.next
}

// complete records one queue's answer for seq. It returns true when the
// channel should be put on the writer's confirm list.
func (t *confirmTracker) complete(seq uint64, ok bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq < t.base || seq-t.base >= uint64(len(t.pending)) {
		return false // the channel was reset meanwhile
	}
	p := &t.pending[seq-t.base]
	if !ok {
		p.nack = true
	}
	p.remaining--
	if p.remaining == 0 {
		t.ready++
	}
	if p.remaining > 0 || t.queued {
		return false
	}
	t.queued = true
	return true
}

// appendConfirms appends the frames for every completed publish not yet
// confirmed: those at the head of the sequence in runs, the others each
// on its own.
func (t *confirmTracker) appendConfirms(items []outItem, channel uint16, stats *counters) []outItem {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queued = false
	done := 0
	for done < len(t.pending) && t.pending[done].remaining <= 0 {
		done++
	}
	for i := 0; i < done; {
		if t.pending[i].sent {
			i++
			continue
		}
		// A run of acks (or of nacks) is one frame. Publishes confirmed
		// ahead do not break it: a multiple ack that covers a tag the
		// client has had its answer for changes nothing there.
		last, unsent := i, 1
		j := i + 1
		for ; j < done && (t.pending[j].sent || t.pending[j].nack == t.pending[i].nack); j++ {
			if !t.pending[j].sent {
				last, unsent = j, unsent+1
			}
		}
		items = t.appendConfirm(items, channel, stats, last, unsent)
		i = last + 1
	}
	for _, p := range t.pending[:done] {
		if p.sent {
			t.ahead--
		} else {
			t.ready--
		}
	}
	for k := done + 1; t.ready > 0 && k < len(t.pending); k++ {
		if p := &t.pending[k]; p.remaining <= 0 && !p.sent {
			items = t.appendConfirm(items, channel, stats, k, 1)
			p.sent = true
			t.ahead++
			t.ready--
		}
	}
	if done > 0 {
		t.base += uint64(done)
		n := copy(t.pending, t.pending[done:])
		t.pending = t.pending[:n]
	}
	return items
}

// appendConfirm appends the frame confirming pending[k], and with it the
// n-1 unconfirmed publishes before it (multiple) when n > 1.
func (t *confirmTracker) appendConfirm(items []outItem, channel uint16, stats *counters, k, n int) []outItem {
	tag := t.base + uint64(k)
	var m wire.Method = &wire.BasicAck{DeliveryTag: tag, Multiple: n > 1}
	if t.pending[k].nack {
		m = &wire.BasicNack{DeliveryTag: tag, Multiple: n > 1}
	} else {
		stats.add(cConfirmed, uint64(n))
	}
	return append(items, outItem{channel: channel, method: m})
}

// unconfirmed is the number of publishes waiting for their confirm.
func (t *confirmTracker) unconfirmed() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending) - t.ahead
}

// reset forgets every pending confirm (the channel is closing).
func (t *confirmTracker) reset() {
	t.mu.Lock()
	t.pending = nil
	t.ahead, t.ready = 0, 0
	t.base = t.next + 1
	t.mu.Unlock()
}
