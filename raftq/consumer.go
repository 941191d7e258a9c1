package raftq

import "slices"

// consumer is the queue's record of a consumer, or of a basic.get owner. A
// record lives while it is attached or holds checked-out messages: a
// detached consumer's messages can still be settled, returned or discarded.
type consumer struct {
	id ConsumerID
	// since is the log index of its first attach (or get): between equal
	// priorities the older single-active candidate goes first.
	since     uint64
	getter    bool // a basic.get owner: never attached, never dispatched to
	attached  bool
	exclusive bool
	// quiescing: the single active consumer receives nothing more because
	// a higher-priority one waits for it to drain (rabbit_fifo's quiescing).
	quiescing bool
	// suspended: its link to the leader broke (OpSuspend); attached,
	// in its place, but handed nothing until it attaches again.
	suspended bool
	inLine    bool // standing in its lineup level's line
	prefetch  uint32
	priority  int32
	timeout   int64 // consumer timeout, ms
	held      uint32
	// lastDeadline is the latest consumer-timeout deadline given to one of
	// its deliveries; deadlines never decrease along order, so the oldest
	// live delivery has the earliest deadline.
	lastDeadline int64
	// order lists its deliveries oldest first. Entries whose message was
	// settled or returned since are stale: the held map no longer has them
	// under this consumer with this seq. They are skipped, and compacted
	// away once they outnumber the live ones.
	order ring[delivery]
	level *level
}

type delivery struct{ index, seq uint64 }

// consumers is the queue's consumer records and the rules of who receives
// what: attaching and leaving, exclusivity, the competing consumers'
// lineup, single active consumer, handing out ready messages, basic.get,
// settlement and the consumer timeout. Messages themselves live elsewhere
// (ready, checkouts); m is the machine the consumers belong to, for its
// clock, configuration and effects, and for what happens to a message
// that comes back.
type consumers struct {
	m    *Machine
	byID map[ConsumerID]*consumer
	// attached counts consumers attached (not detached, not getters).
	attached int
	// exclusive is the attached exclusive consumer, if any.
	exclusive *consumer
	// lineup orders competing consumers (without single active consumer).
	lineup lineup
	// active is the single active consumer, if the queue has that on.
	active *consumer
}

// credit is how many more messages c may be handed now.
func (c *consumer) credit() uint32 {
	if c.held >= c.prefetch {
		return 0
	}
	return c.prefetch - c.held
}

// canReceive says whether dispatch may hand c a message now.
func (c *consumer) canReceive() bool {
	return c.attached && !c.quiescing && !c.suspended && c.held < c.prefetch
}

// lineup decides which competing consumer gets the next message, as
// classic.lineup does and as rabbit_fifo's service queue does: the highest
// priority level with anyone able to receive wins, and within a level
// consumers take turns. A consumer stands in its level's line only while it
// can receive; it goes to the back after each delivery, and rejoins at the
// back when a settle gives it credit again.
type lineup struct {
	levels []*level // highest priority first
}

type level struct {
	priority int32
	members  int
	line     ring[*consumer]
}

func (l *lineup) join(c *consumer) {
	i := 0
	for i < len(l.levels) && l.levels[i].priority > c.priority {
		i++
	}
	if i == len(l.levels) || l.levels[i].priority != c.priority {
		l.levels = slices.Insert(l.levels, i, &level{priority: c.priority})
	}
	c.level = l.levels[i]
	c.level.members++
}

func (l *lineup) leave(c *consumer) {
	lv := c.level
	if lv == nil {
		return
	}
	l.stepOut(c)
	c.level = nil
	lv.members--
	if lv.members == 0 {
		l.levels = slices.DeleteFunc(l.levels, func(x *level) bool { return x == lv })
	}
}

// stepOut takes c out of its line, if it stands there, keeping its level:
// it cannot receive for now.
func (l *lineup) stepOut(c *consumer) {
	if c.inLine {
		c.level.line.filter(func(x **consumer) bool { return *x != c })
		c.inLine = false
	}
}

// offer puts c at the back of its line if it can receive and is not there.
func (l *lineup) offer(c *consumer) {
	if c.inLine || c.level == nil || !c.canReceive() {
		return
	}
	c.level.line.push(c)
	c.inLine = true
}

// next takes the consumer whose turn it is, or nil.
func (l *lineup) next() *consumer {
	for _, lv := range l.levels {
		if lv.line.len() > 0 {
			c := lv.line.pop()
			c.inLine = false
			if !c.canReceive() {
				panic("raftq: a consumer in line cannot receive")
			}
			return c
		}
	}
	return nil
}

// sorted lists the consumer records by ID.
func (cs *consumers) sorted() []*consumer {
	out := make([]*consumer, 0, len(cs.byID))
	for _, c := range cs.byID {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *consumer) int { return cmpID(a.id, b.id) })
	return out
}
