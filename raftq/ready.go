package raftq

import "math/bits"

// msg is all the queue keeps of a message: 32 bytes, whatever its size.
// The message itself stays in its enqueue entry in the log.
type msg struct {
	index uint64 // the log index of its enqueue: its ID
	// expiry is the Unix millisecond at and after which it is expired; 0
	// when it never expires.
	expiry int64
	size   uint32 // body bytes
	// delivery is the delivery-count: failed delivery attempts (reject,
	// lost consumer).
	delivery uint32
	// acquired counts how many times it was handed out (acquired-count).
	acquired uint32
	priority uint8 // 0-31
}

// expired says whether m has expired at time now.
func (m *msg) expired(now int64) bool { return m.expiry != 0 && now >= m.expiry }

// Message priorities, as RabbitMQ 4.3 quorum queues have them
// (rabbit_fifo.erl ?MAX_PRIORITY and ?DEFAULT_PRIORITY, rabbit_fifo_pq; the
// priority guide's "Quorum Queues" section): 32 strict levels, the property
// clamped to 0-31, and a message without one counted as priority 4.
const (
	priorityLevels  = 32
	maxPriority     = priorityLevels - 1
	defaultPriority = 4
)

// priorityOf is the level of the message c enqueues under configuration
// cfg.
func (cfg *Config) priorityOf(c *Command) uint8 {
	if cfg.ClassicPriority {
		p := uint8(0)
		if c.HasPriority {
			p = c.Priority
		}
		return min(p, cfg.MaxPriority, maxPriority)
	}
	return clampPriority(c.Priority, c.HasPriority)
}

func clampPriority(p uint8, present bool) uint8 {
	if !present {
		return defaultPriority
	}
	return min(p, maxPriority)
}

// ready holds the messages waiting for a consumer, in the order RabbitMQ
// 4.3 serves them (rabbit_fifo take_next_msg/1): messages that came back
// first, in the order they came back and whatever their priority (the
// priority guide, "Redelivery of Returned Messages"); then never-delivered
// messages, highest priority first, in publish order within a priority.
type ready struct {
	returns ring[msg]
	levels  [priorityLevels]ring[msg]
	// nonEmpty has bit p set while levels[p] holds messages, so the highest
	// non-empty level is found in one instruction.
	nonEmpty uint32
	n        int
	bytes    int64
	// expiring counts ready messages with an expiry, so a queue without
	// TTLs never looks for expired ones.
	expiring int
}

func (r *ready) count(x *msg, sign int) {
	r.n += sign
	r.bytes += int64(sign) * int64(x.size)
	if x.expiry != 0 {
		r.expiring += sign
	}
}

// pushFresh adds a never-delivered message at the tail of its level.
func (r *ready) pushFresh(x msg) {
	r.levels[x.priority].push(x)
	r.nonEmpty |= 1 << x.priority
	r.count(&x, 1)
}

// pushReturned adds a message that came back at the tail of the returns.
func (r *ready) pushReturned(x msg) {
	r.returns.push(x)
	r.count(&x, 1)
}

// top is the highest non-empty level; r.nonEmpty must not be 0.
func (r *ready) top() int { return bits.Len32(r.nonEmpty) - 1 }

// head is the next message to hand out, or nil when nothing is ready.
func (r *ready) head() *msg {
	if r.returns.len() > 0 {
		return r.returns.peek()
	}
	if r.nonEmpty == 0 {
		return nil
	}
	return r.levels[r.top()].peek()
}

// pop removes the next message to hand out; r must not be empty.
func (r *ready) pop() msg {
	if r.returns.len() > 0 {
		x := r.returns.pop()
		r.count(&x, -1)
		return x
	}
	return r.popLevel(r.top())
}

func (r *ready) popLevel(p int) msg {
	x := r.levels[p].pop()
	if r.levels[p].len() == 0 {
		r.nonEmpty &^= 1 << p
	}
	r.count(&x, -1)
	return x
}

// each calls f on every ready message: returns first, then each level from
// the highest priority down, each in order.
func (r *ready) each(f func(*msg)) {
	for i := 0; i < r.returns.len(); i++ {
		f(r.returns.at(i))
	}
	for b := r.nonEmpty; b != 0; {
		p := bits.Len32(b) - 1
		b &^= 1 << p
		for i := 0; i < r.levels[p].len(); i++ {
			f(r.levels[p].at(i))
		}
	}
}

// nth is the message i-th in line to be handed out (0 for the head), or
// nil if fewer than i+1 are ready: the returns, then each level from the
// highest priority down, without walking the messages before it.
func (r *ready) nth(i int) *msg {
	if i < 0 || i >= r.n {
		return nil
	}
	if i < r.returns.len() {
		return r.returns.at(i)
	}
	i -= r.returns.len()
	for b := r.nonEmpty; b != 0; {
		p := bits.Len32(b) - 1
		b &^= 1 << p
		if i < r.levels[p].len() {
			return r.levels[p].at(i)
		}
		i -= r.levels[p].len()
	}
	return nil
}

// nextExpiry is the earliest expiry among the messages at the head of the
// returns and of each level, the only ones expire looks at; false when
// none of them expires.
func (r *ready) nextExpiry() (at int64, ok bool) {
	if r.expiring == 0 {
		return 0, false
	}
	soonest := func(x *msg) {
		if x.expiry != 0 && (!ok || x.expiry < at) {
			at, ok = x.expiry, true
		}
	}
	if r.returns.len() > 0 {
		soonest(r.returns.peek())
	}
	for p := range r.levels {
		if r.levels[p].len() > 0 {
			soonest(r.levels[p].peek())
		}
	}
	return at, ok
}

// clear drops every ready message and returns how many there were.
func (r *ready) clear() int {
	n := r.n
	*r = ready{}
	return n
}
