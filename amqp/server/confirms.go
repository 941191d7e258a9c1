package server

import (
	"sync"

	"github.com/warrenmq/warren/amqp"
)

// confirmTracker numbers a confirm-mode channel's publishes and turns their
// completions into basic.ack / basic.nack frames. Confirms are released in
// sequence order, so a run of completed publishes becomes one frame with
// multiple=true.
type confirmTracker struct {
	mu      sync.Mutex
	base    uint64        // sequence number of pending[0]
	pending []pendingConf // publishes not yet confirmed, oldest first
	next    uint64        // last sequence number handed out
	queued  bool          // the channel is already on the writer's list
}

type pendingConf struct {
	remaining int32 // queues yet to store the message
	nack      bool  // some queue refused it
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
	if seq != t.base || p.remaining > 0 || t.queued {
		return false
	}
	t.queued = true
	return true
}

// appendConfirms appends the frames for every completed publish at the
// head of the sequence.
func (t *confirmTracker) appendConfirms(items []outItem, channel uint16, stats *counters) []outItem {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queued = false
	done := 0
	for done < len(t.pending) && t.pending[done].remaining <= 0 {
		done++
	}
	for i := 0; i < done; {
		// A run of acks (or of nacks) is one frame.
		j := i
		for j+1 < done && t.pending[j+1].nack == t.pending[i].nack {
			j++
		}
		tag := t.base + uint64(j)
		multiple := j > i
		var m amqp.Method = &amqp.BasicAck{DeliveryTag: tag, Multiple: multiple}
		if t.pending[i].nack {
			m = &amqp.BasicNack{DeliveryTag: tag, Multiple: multiple}
		} else {
			stats.add(cConfirmed, uint64(j-i+1))
		}
		items = append(items, outItem{channel: channel, method: m})
		i = j + 1
	}
	if done > 0 {
		t.base += uint64(done)
		n := copy(t.pending, t.pending[done:])
		t.pending = t.pending[:n]
	}
	return items
}

// unconfirmed is the number of publishes waiting for their confirm.
func (t *confirmTracker) unconfirmed() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// reset forgets every pending confirm (the channel is closing).
func (t *confirmTracker) reset() {
	t.mu.Lock()
	t.pending = nil
	t.base = t.next + 1
	t.mu.Unlock()
}
