package raftq

// checkouts is every checked-out message, by ID and by the number of its
// handing-out. It is its own part because three things must agree at every
// step: the held map, the delivery numbers the outside world settles by,
// and each holder's consumer.held count and delivery order. Only these
// methods change them.
type checkouts struct {
	// deliveries numbers every handing-out of a message, to tell a live
	// checked-out entry from a stale one in a consumer's delivery order.
	deliveries uint64
	// held is every checked-out message, by ID.
	held map[uint64]held
	// handedOut finds a checked-out message by the number of its
	// handing-out (held.seq), which is the delivery's ID outside the
	// machine: every member knows it, so a delivery one leader made can
	// be settled at the next. Derived from held; not in snapshots.
	handedOut map[uint64]uint64
}

func newCheckouts() checkouts {
	return checkouts{held: make(map[uint64]held), handedOut: make(map[uint64]uint64)}
}

// held is a checked-out message.
type held struct {
	msg
	owner    *consumer
	deadline int64  // consumer timeout: returned at this Unix millisecond
	seq      uint64 // which handing-out, to recognise stale order entries
}

// len is the number of checked-out messages.
func (k *checkouts) len() int { return len(k.held) }

// hold records x as checked out to c at time now, with its
// consumer-timeout deadline, and returns the number of this handing-out.
func (k *checkouts) hold(c *consumer, x msg, now int64) uint64 {
	k.deliveries++
	deadline := addSat(now, c.timeout)
	// Deadlines must not decrease along c.order (a re-attach may shorten
	// the timeout): the oldest delivery's deadline is c's earliest.
	deadline = max(deadline, c.lastDeadline)
	c.lastDeadline = deadline
	k.put(c, held{msg: x, owner: c, deadline: deadline, seq: k.deliveries})
	return k.deliveries
}

// put files h, checked out to c, last in c's delivery order: hold's
// bookkeeping, and a restored snapshot's.
func (k *checkouts) put(c *consumer, h held) {
	k.held[h.index] = h
	k.handedOut[h.seq] = h.index
	c.held++
	c.order.push(delivery{index: h.index, seq: h.seq})
}

// take removes message i from c's checked-out messages; false if c does
// not hold it.
func (k *checkouts) take(c *consumer, i uint64) (msg, bool) {
	h, ok := k.held[i]
	if !ok || h.owner != c {
		return msg{}, false
	}
	delete(k.held, i)
	delete(k.handedOut, h.seq)
	c.held--
	return h.msg, true
}

// takeLive removes delivery d from c if it is still live.
func (k *checkouts) takeLive(c *consumer, d delivery) (msg, bool) {
	if !k.live(c, d) {
		return msg{}, false
	}
	return k.take(c, d.index)
}

// live says whether order entry d is still checked out to c.
func (k *checkouts) live(c *consumer, d delivery) bool {
	h, ok := k.held[d.index]
	return ok && h.owner == c && h.seq == d.seq
}

// tidy drops stale entries at the front of c's delivery order, and
// compacts it when stale entries dominate, so that its head is always the
// oldest live delivery and its length stays proportional to c.held.
func (k *checkouts) tidy(c *consumer) {
	for c.order.len() > 0 && !k.live(c, *c.order.peek()) {
		c.order.pop()
	}
	if c.order.len() > 2*int(c.held)+16 {
		c.order.filter(func(d *delivery) bool { return k.live(c, *d) })
	}
}

// earliestDeadline is the consumer-timeout deadline of c's oldest live
// delivery, the earliest of its deadlines; c must hold a message.
func (k *checkouts) earliestDeadline(c *consumer) int64 {
	return k.held[c.order.peek().index].deadline
}

// heldBy names the consumer holding the message of delivery and the
// message's ID; false once that handing-out is over.
func (k *checkouts) heldBy(delivery uint64) (ConsumerID, uint64, bool) {
	i, ok := k.handedOut[delivery]
	if !ok {
		return 0, 0, false
	}
	return k.held[i].owner.id, i, true
}

// appendDeliveries appends the numbers of the deliveries c holds, oldest
// first.
func (k *checkouts) appendDeliveries(c *consumer, dst []uint64) []uint64 {
	for i := 0; i < c.order.len(); i++ {
		if d := *c.order.at(i); k.live(c, d) {
			dst = append(dst, d.seq)
		}
	}
	return dst
}
