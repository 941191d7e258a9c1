package raftq

import "fmt"

// checkInvariants verifies the machine's internal consistency; the tests
// call it after every command.
func checkInvariants(m *Machine) error { return check(m, true) }

// checkStructure verifies what must hold of any machine, even one restored
// from a snapshot that no command produced: everything but what every
// command's final dispatch establishes (no expired message at the head, no
// ready message while a consumer can take it, an active consumer chosen).
func checkStructure(m *Machine) error { return check(m, false) }

func check(m *Machine, settled bool) error {
	where := map[uint64]string{}
	place := func(i uint64, p string) error {
		if q, dup := where[i]; dup {
			return fmt.Errorf("message %d both %s and %s", i, q, p)
		}
		if i == 0 || i > m.lastIndex {
			return fmt.Errorf("message %d %s, last index %d", i, p, m.lastIndex)
		}
		where[i] = p
		return nil
	}

	r := &m.ready
	n, expiring, size := 0, 0, int64(0)
	count := func(x *msg) {
		n++
		size += int64(x.size)
		if x.expiry != 0 {
			expiring++
		}
	}
	for i := 0; i < r.returns.len(); i++ {
		x := r.returns.at(i)
		count(x)
		if err := place(x.index, "ready"); err != nil {
			return err
		}
	}
	for p := range r.levels {
		lv := &r.levels[p]
		if (lv.len() > 0) != (r.nonEmpty&(1<<p) != 0) {
			return fmt.Errorf("level %d: %d messages, bit %v", p, lv.len(), r.nonEmpty&(1<<p) != 0)
		}
		var last uint64
		for i := 0; i < lv.len(); i++ {
			x := lv.at(i)
			count(x)
			if int(x.priority) != p || x.index <= last {
				return fmt.Errorf("level %d holds %+v after m%d", p, *x, last)
			}
			last = x.index
			if err := place(x.index, "ready"); err != nil {
				return err
			}
		}
	}
	if n != r.n || size != r.bytes || expiring != r.expiring {
		return fmt.Errorf("ready counts n=%d bytes=%d expiring=%d, records say %d %d %d", r.n, r.bytes, r.expiring, n, size, expiring)
	}
	if h := r.head(); settled && h != nil && h.expired(m.clock) {
		return fmt.Errorf("expired m%d at the head after a command", h.index)
	}

	attached := 0
	for id, c := range m.consumers.byID {
		if c.id != id {
			return fmt.Errorf("consumer %d filed under %d", c.id, id)
		}
		if c.attached {
			attached++
		}
		if c.getter && c.attached || !c.attached && c.held == 0 {
			return fmt.Errorf("consumer %d: getter=%v attached=%v held=%d", id, c.getter, c.attached, c.held)
		}
		live := 0
		var lastDeadline int64 = -1 << 63
		for i := 0; i < c.order.len(); i++ {
			d := *c.order.at(i)
			if !m.checkouts.live(c, d) {
				if i == 0 {
					return fmt.Errorf("consumer %d: stale delivery at the head", id)
				}
				continue
			}
			live++
			h := m.checkouts.held[d.index]
			if h.deadline < lastDeadline {
				return fmt.Errorf("consumer %d: deadlines decrease", id)
			}
			lastDeadline = h.deadline
		}
		if live != int(c.held) {
			return fmt.Errorf("consumer %d: held=%d, %d live deliveries", id, c.held, live)
		}
		if c.order.len() > 2*int(c.held)+16 {
			return fmt.Errorf("consumer %d: %d deliveries in order for %d held", id, c.order.len(), c.held)
		}
		if c.quiescing && m.consumers.active != c {
			return fmt.Errorf("consumer %d quiescing, not active", id)
		}
		if c.suspended && (!c.attached || c.getter) {
			return fmt.Errorf("consumer %d suspended, not attached", id)
		}
		if m.cfg.SingleActiveConsumer && (c.level != nil || c.inLine) {
			return fmt.Errorf("consumer %d in the lineup with single active consumer", id)
		}
		if !m.cfg.SingleActiveConsumer && c.attached != (c.level != nil) {
			return fmt.Errorf("consumer %d: attached=%v, level=%v", id, c.attached, c.level != nil)
		}
		if c.level != nil && c.inLine != c.canReceive() {
			return fmt.Errorf("consumer %d: in line %v, can receive %v", id, c.inLine, c.canReceive())
		}
		if settled && c.canReceive() && r.n > 0 && (!m.cfg.SingleActiveConsumer || m.consumers.active == c) {
			return fmt.Errorf("consumer %d can receive while %d messages are ready", id, r.n)
		}
	}
	if attached != m.consumers.attached {
		return fmt.Errorf("%d attached, counted %d", attached, m.consumers.attached)
	}
	for i, h := range m.checkouts.held {
		if h.index != i || m.consumers.byID[h.owner.id] != h.owner {
			return fmt.Errorf("checked-out m%d: bad record or owner", i)
		}
		if err := place(i, fmt.Sprintf("checked out to %d", h.owner.id)); err != nil {
			return err
		}
		if c, idx, ok := m.HeldBy(h.seq); !ok || c != h.owner.id || idx != i {
			return fmt.Errorf("checked-out m%d: delivery %d not found by its number", i, h.seq)
		}
	}
	if len(m.checkouts.handedOut) != len(m.checkouts.held) {
		return fmt.Errorf("%d deliveries numbered, %d checked out", len(m.checkouts.handedOut), len(m.checkouts.held))
	}
	if x := m.consumers.exclusive; x != nil && (m.consumers.byID[x.id] != x || !x.attached || m.consumers.attached != 1) {
		return fmt.Errorf("exclusive consumer %d not alone", x.id)
	}
	if m.cfg.SingleActiveConsumer {
		if a := m.consumers.active; a != nil && (m.consumers.byID[a.id] != a || !a.attached) {
			return fmt.Errorf("active consumer %d not attached", a.id)
		}
		if settled && m.consumers.active == nil && m.consumers.attached > 0 {
			return fmt.Errorf("%d attached consumers and none active", m.consumers.attached)
		}
	} else if m.consumers.active != nil {
		return fmt.Errorf("an active consumer without single active consumer")
	}
	members := 0
	for i, lv := range m.consumers.lineup.levels {
		if lv.members == 0 || (i > 0 && m.consumers.lineup.levels[i-1].priority <= lv.priority) {
			return fmt.Errorf("lineup level %d: members %d, out of order", lv.priority, lv.members)
		}
		members += lv.members
		for j := 0; j < lv.line.len(); j++ {
			if c := *lv.line.at(j); c.level != lv || !c.inLine {
				return fmt.Errorf("consumer %d in the wrong line", c.id)
			}
		}
	}
	if !m.cfg.SingleActiveConsumer && members != m.consumers.attached {
		return fmt.Errorf("lineup has %d members, %d attached", members, m.consumers.attached)
	}

	var deadBytes int64
	for i, x := range m.dead.byIndex {
		if x.index != i {
			return fmt.Errorf("dead letter m%d filed under %d", x.index, i)
		}
		deadBytes += int64(x.size)
		if err := place(i, "dead-lettered"); err != nil {
			return err
		}
	}
	if deadBytes != m.dead.bytes {
		return fmt.Errorf("dead-letter bytes %d, records say %d", m.dead.bytes, deadBytes)
	}

	var delayedBytes int64
	for i, w := range m.delayed.q {
		if i > 0 && cmpWaiting(m.delayed.q[i-1], w) >= 0 {
			return fmt.Errorf("delayed m%d out of order", w.x.index)
		}
		if settled && w.at <= m.clock {
			return fmt.Errorf("delayed m%d due at %d, still waiting at %d after a command", w.x.index, w.at, m.clock)
		}
		delayedBytes += int64(w.x.size)
		if err := place(w.x.index, "delayed"); err != nil {
			return err
		}
	}
	if delayedBytes != m.delayed.bytes {
		return fmt.Errorf("delayed bytes %d, records say %d", m.delayed.bytes, delayedBytes)
	}
	if m.dead.order.len() > 0 {
		if _, ok := m.dead.byIndex[*m.dead.order.peek()]; !ok {
			return fmt.Errorf("stale dead letter at the head")
		}
	}
	return nil
}
