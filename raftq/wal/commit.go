package wal

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// run is the committer: it takes every request waiting and commits them
// together. A batch taken after Close set closed is the last: nothing can
// be queued after it.
func (l *Log) run() {
	defer close(l.stopped)
	var batch []*request
	for range l.wake {
		l.mu.Lock()
		batch, l.queue = l.queue, batch[:0]
		closed := l.closed
		var c *compaction
		if l.failed == nil {
			c = l.planCompaction()
		}
		l.mu.Unlock()
		if len(batch) > 0 || c != nil {
			l.commit(batch, c)
			clear(batch) // drop the references for the collector
		}
		if closed {
			return
		}
	}
}

// commit writes the compaction's copies and then batch, syncs once, and
// only then updates the index and answers: an entry is readable (and
// StoreLogs returns) once it is durable.
func (l *Log) commit(batch []*request, c *compaction) {
	if c != nil {
		if err := c.read(); err != nil {
			l.log.Error("wal: read entries to copy forward; compaction skipped", "err", err)
			c = nil
		}
	}
	err := l.write(batch, c)
	l.commits.Add(1)
	l.mu.Lock()
	if err != nil {
		first := l.failed == nil
		if first {
			l.failed = fmt.Errorf("wal write: %w", err)
		}
		err = l.failed
		l.log.Error("wal: write failed; the log takes no more writes", "err", err)
		if first {
			l.failedNow(err) // failure.go
		}
	} else {
		if c != nil {
			l.applyCompaction(c)
		}
		for _, r := range batch {
			l.applyRequest(r)
		}
		l.reclaim()
	}
	l.mu.Unlock()
	for _, r := range batch {
		if r.done == nil {
			continue
		}
		if err != nil {
			l.answerFailed(r, err)
		} else {
			r.done <- r.err
		}
	}
}

// write appends the compaction's copies (first: see compaction) and the
// batch's records to the segment being written, starting the next
// segment when one is full, and syncs.
func (l *Log) write(batch []*request, c *compaction) error {
	w := l.segs[len(l.segs)-1] // only the committer changes segs
	pending := l.buf[:0]
	start := w.size
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		n := len(pending)
		// A zero header after the records ends the segment for replay
		// until the next write covers it: past it, a recycled file
		// holds its earlier use.
		pending = append(pending, zeros[:headerSize]...)
		if w.dio != nil {
			if err := l.writeDirect(w, pending, n, start); err != nil {
				return err
			}
		} else {
			if err := l.prefill(w, start+int64(len(pending))); err != nil {
				return err
			}
			if _, err := w.f.WriteAt(pending, start); err != nil {
				return err
			}
		}
		start += int64(n)
		w.size = start
		pending = pending[:0]
		return nil
	}
	place := func(b []byte) (*segment, uint32, error) {
		if end := start + int64(len(pending)); end > 0 && end+int64(len(b)) > l.segSize {
			if err := flush(); err != nil {
				return nil, 0, err
			}
			// The full segment is synced before the next is written: only
			// the last segment may end in a torn record. A direct write
			// is durable when it returns.
			if w.dio == nil {
				if err := unix.Fdatasync(int(w.f.Fd())); err != nil {
					return nil, 0, err
				}
			}
			l.mu.Lock()
			next, err := l.newSegment(w.id + 1)
			l.mu.Unlock()
			if err != nil {
				return nil, 0, err
			}
			if err := w.closeDirect(); err != nil {
				return nil, 0, err
			}
			w, start = next, 0
		}
		base := uint32(start + int64(len(pending)))
		pending = append(pending, b...)
		saltRecords(pending[len(pending)-len(b):], salt(w.id))
		return w, base, nil
	}
	var err error
	if c != nil {
		if c.seg, c.base, err = place(c.buf); err != nil {
			return err
		}
	}
	for _, r := range batch {
		if r.seg, r.base, err = place(r.buf); err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if cap(pending) > 4<<20 {
		pending = nil // a compaction's or a huge message's: let it go
	}
	l.buf = pending
	if w.dio != nil {
		return nil // durable already
	}
	return unix.Fdatasync(int(w.f.Fd()))
}

// prefillSize is how far ahead of the writes a segment is filled with
// zeros, prefillPiece at a time.
const (
	prefillSize  = 1 << 20
	prefillPiece = 4 << 10
)

var zeros = make([]byte, prefillPiece)

// prefill makes sure the file holds at least end bytes by writing zeros
// (prefillSize at a time) beyond what it holds. Records then overwrite
// blocks the file already has: an fdatasync of an append that grows the
// file also commits the new size and block allocation to the journal,
// which on this project's machines cost about a third more CPU and half
// again the latency of one that does not. A recycled file is filled
// already.
//
// The zeros go in page-sized writes. The page cache sizes the folio it
// creates by the write, and writes a dirty folio back whole: after one
// 1 MiB write of zeros, every fdatasync of a 1 KiB record wrote 1 MiB to
// the disk, and cost a third more CPU than with 4 KiB pages
// (docs/performance.md).
func (l *Log) prefill(s *segment, end int64) error {
	for s.filled < end {
		// Up to the segment's size, or to end for a record past it.
		n := min(int64(prefillSize), max(l.segSize, end)-s.filled)
		for off := int64(0); off < n; off += prefillPiece {
			piece := min(prefillPiece, n-off)
			if _, err := s.f.WriteAt(zeros[:piece], s.filled+off); err != nil {
				return fmt.Errorf("extend wal segment: %w", err)
			}
		}
		s.filled += n
	}
	return nil
}

// applyRequest brings the index up to date with r, now durable; mu held.
func (l *Log) applyRequest(r *request) {
	switch r.kind {
	case kindEntry:
		if r.g.dropped {
			r.err = ErrNoGroup
			return
		}
		for k, i := range r.idx {
			end := uint32(len(r.buf))
			if k+1 < len(r.offs) {
				end = r.offs[k+1]
			}
			at := loc{seg: r.seg.id, off: r.base + r.offs[k], n: end - r.offs[k]}
			if old, ok := r.g.put(i, at); ok {
				l.dead(old)
			}
			r.seg.live += int64(at.n)
		}
	case kindSet:
		if r.g.dropped {
			r.err = ErrNoGroup
			return
		}
		l.setStable(r.g, r.key, r.val, r.seg)
	}
	// Deletions and drops were applied when they were queued.
}

// reclaim removes the oldest segments while nothing in them is live;
// mu held.
func (l *Log) reclaim() {
	for len(l.segs) > 1 && l.segs[0].live == 0 && l.segs[0].stable == 0 {
		l.retire(l.segs[0])
		l.segs = l.segs[1:]
	}
}
