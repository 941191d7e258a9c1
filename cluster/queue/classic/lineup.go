package classic

import "slices"

// lineup decides which consumer gets the next message: the consumers that can
// receive now, grouped by priority (x-priority). The highest level with anyone
// in line always wins; within a level, consumers take turns.
//
// Round-robin falls out of the line itself: the chosen consumer is popped from
// the front and, if it can still receive, goes to the back. A consumer that
// runs out of credit or is blocked simply is not in line, and rejoins at the
// back when a settle or Resume makes it able to receive again. So choosing is
// O(number of priority levels), never a scan over consumers.
type lineup struct {
	levels []*level // highest priority first; a level exists while it has members
}

// level is the consumers attached at one priority.
type level struct {
	priority int32
	members  int             // attached consumers at this priority
	line     ring[*consumer] // those of them that can receive now, in turn order
}

// join adds c as a member at its priority; it does not put c in line.
func (l *lineup) join(c *consumer, priority int32) {
	i := 0
	for i < len(l.levels) && l.levels[i].priority > priority {
		i++
	}
	if i == len(l.levels) || l.levels[i].priority != priority {
		l.levels = slices.Insert(l.levels, i, &level{priority: priority})
	}
	c.level = l.levels[i]
	c.level.members++
}

// leave removes c from its level, and the level once it has no members.
func (l *lineup) leave(c *consumer) {
	lv := c.level
	if c.inLine {
		lv.line.removeFirst(func(x *consumer) bool { return x == c })
		c.inLine = false
	}
	lv.members--
	if lv.members > 0 {
		return
	}
	if i := slices.Index(l.levels, lv); i >= 0 {
		l.levels = slices.Delete(l.levels, i, i+1)
	}
}

// offer puts c at the back of its level's line if it can receive and is not
// already there. Call it whenever something may have made c able to receive.
func (l *lineup) offer(c *consumer) {
	if c.inLine || !c.canReceive() {
		return
	}
	c.level.line.push(c)
	c.inLine = true
}

// next takes the consumer whose turn it is, or nil when nobody can receive.
// The caller offers it again after delivering.
func (l *lineup) next() *consumer {
	for _, lv := range l.levels {
		if c, ok := lv.line.pop(); ok {
			c.inLine = false
			return c
		}
	}
	return nil
}

// reset forgets every level.
func (l *lineup) reset() { l.levels = nil }
