package wal

import (
	"fmt"
	"os"
)

// compaction copies the live entries and current stable values of the
// oldest segment forward so that it can be removed. Entries are copied
// byte for byte (same record, new place) but for the checksum's salt. The
// copies are written before the batch they ride with: a stable value set
// in that batch must come after the copy of the value it replaces, or
// replay would bring the old one back. An entry deleted after the plan was
// made has its deletion record in a later batch, after its copy, so replay
// deletes it again.
type compaction struct {
	from    *segment
	entries []copiedEntry
	stable  []copiedStable
	buf     []byte
	offs    []uint32 // each entry's copy's offset in buf
	seg     *segment // where buf landed
	base    uint32
}

type copiedEntry struct {
	g  *group
	i  uint64
	at loc
}

type copiedStable struct {
	g   *group
	key string
	val []byte
}

// planCompaction returns the oldest segment's compaction when it is due:
// there are at least two segments behind it, and less than half of it is
// live (mostly-live segments are left alone, or a long backlog would be
// rewritten again and again); mu held.
func (l *Log) planCompaction() *compaction {
	if len(l.segs) < 3 {
		return nil
	}
	s := l.segs[0]
	if (s.live == 0 && s.stable == 0) || 2*s.live >= s.size {
		return nil
	}
	c := &compaction{from: s}
	for _, g := range l.groups {
		g.each(s.id, func(i uint64, at loc) {
			c.entries = append(c.entries, copiedEntry{g: g, i: i, at: at})
		})
		for key, v := range g.stable {
			if v.seg == s.id {
				c.stable = append(c.stable, copiedStable{g: g, key: key, val: v.val})
			}
		}
	}
	return c
}

// read fills buf with the copies. The segment stays until the copies are
// committed, so reading it without mu is safe.
func (c *compaction) read() error {
	var size int64
	for _, e := range c.entries {
		size += int64(e.at.n)
	}
	c.buf = make([]byte, 0, size+int64(64*len(c.stable)))
	c.offs = make([]uint32, len(c.entries))
	for k, e := range c.entries {
		c.offs[k] = uint32(len(c.buf))
		c.buf = c.buf[:len(c.buf)+int(e.at.n)]
		b := c.buf[c.offs[k]:]
		if _, err := c.from.f.ReadAt(b, int64(e.at.off)); err != nil {
			return fmt.Errorf("segment %08x offset %d: %w", c.from.id, e.at.off, err)
		}
		saltRecords(b, salt(c.from.id)) // unsalted: the copy is salted where it lands
	}
	for _, s := range c.stable {
		c.buf = appendSet(c.buf, s.g.id, []byte(s.key), s.val)
	}
	return nil
}

// applyCompaction points the index at the copies of what is still where
// it was when the plan was made; mu held.
func (l *Log) applyCompaction(c *compaction) {
	for k, e := range c.entries {
		if e.g.dropped {
			continue
		}
		if cur, ok := e.g.find(e.i); !ok || cur != e.at {
			continue
		}
		at := loc{seg: c.seg.id, off: c.base + c.offs[k], n: e.at.n}
		e.g.put(e.i, at)
		l.dead(e.at)
		c.seg.live += int64(at.n)
	}
	for _, s := range c.stable {
		if s.g.dropped {
			continue
		}
		if v, ok := s.g.stable[s.key]; ok && v.seg == c.from.id {
			l.setStable(s.g, s.key, v.val, c.seg)
		}
	}
}

func removeFile(path string) error { return os.Remove(path) }
