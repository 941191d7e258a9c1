// Package wal is a node's write-ahead log for its quorum queues' Raft
// groups: every group's log entries and stable values (term, vote) in one
// sequence of append-only segment files, as RabbitMQ's per-node WAL does
// for Ra.
//
// Why not a b-tree (bbolt): a Raft log is written once, at its end, and
// deleted from the front; a b-tree pays page writes, rebalancing and two
// fsyncs per commit for that. Here a commit is one durable write (a
// direct write where the file system allows it, direct.go; else a write
// and an fdatasync), whatever the number of groups and entries in it (group
// commit: one committer goroutine takes every write waiting, with no
// timer, so a lone writer is served at once and the writes that arrive
// during an fsync form the next batch). Deleting entries is an in-memory
// index update plus a small record that rides along with the next commit.
//
// The index of every group's entries (12 bytes per entry) is in memory and
// rebuilt by reading the segments at Open. Space comes back oldest segment
// first: a segment whose entries are all deleted goes; when the oldest
// holds only a few live entries (a message left unacked for hours in a
// queue that moved on), they are copied forward and the segment goes.
// Removing segments only from the front keeps replay correct: a deletion
// record can only concern entries in its own segment or older ones.
//
// A spent segment's file is kept (up to maxSpares) and becomes a later
// segment: writing over pages the kernel still caches costs a fraction of
// allocating new ones, which on this project's machines was an eighth of
// the broker's CPU under load. Each write ends with a zero header (the end
// of the segment for replay), and checksums are salted with the segment's
// ID, so nothing left from a file's earlier use is ever replayed.
package wal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultSegmentSize is the size after which a segment is closed and the
// next one begun.
const DefaultSegmentSize = 64 << 20

// maxSpares is how many spent segment files are kept for reuse. One is
// enough while the log's size is steady; a second covers a segment
// reclaimed and another begun in the same commit.
const maxSpares = 2

// Options tune a Log; the zero value is the default.
type Options struct {
	SegmentSize int64
	Logger      *slog.Logger
	// Buffered writes through the page cache and syncs with fdatasync
	// even where direct writes are possible (direct.go).
	Buffered bool
	// OnFailure, if set, is called once, on a goroutine of its own, when
	// a write or sync fails (a full disk, an I/O error): the log then
	// takes no more writes, and the process is to exit: every write from
	// then on waits for good instead of failing (failure.go).
	OnFailure func(error)
}

// ErrClosed answers writes after Close.
var ErrClosed = errors.New("wal: closed")

// ErrNoGroup answers use of a dropped group's handle.
var ErrNoGroup = errors.New("wal: no such group")

// Log is the write-ahead log of a node. Its methods are safe for
// concurrent use.
type Log struct {
	dir     string
	segSize int64
	log     *slog.Logger

	mu     sync.RWMutex
	groups map[string]*group
	segs   []*segment // oldest first; the last is written to
	spares []*segment // spent segments, their files renamed spare-ID, for the next ones
	queue  []*request // waiting for the committer
	closed bool
	failed error // a write or fsync failed: the files' state is unknown

	// wake (capacity one) tells the committer the queue has work.
	wake    chan struct{}
	stopped chan struct{}
	// closing is closed by Close; onFailure is Options.OnFailure
	// (failure.go).
	closing   chan struct{}
	onFailure func(error)
	buf       []byte // the committer's write buffer

	commits atomic.Uint64 // batches made durable (a direct write, or a write and fdatasync)

	// useDirect: the segment written to has a direct descriptor
	// (direct.go); direct is the committer's state for it.
	useDirect bool
	direct    directWriter
}

type segment struct {
	id   uint32
	f    *os.File
	dio  *os.File // the direct descriptor of the segment written to, or nil
	size int64    // bytes written; the committer's (and replay's) alone
	// filled is the file's size: records up to size, then a zero header,
	// then zeros (prefill) or a recycled file's earlier use. The
	// committer's alone.
	filled int64
	// live counts the bytes of entries the index points at, stable the
	// stable values whose latest record is here. Both zero (and the
	// segment the oldest) means it can go.
	live   int64
	stable int
}

// request is one write for the committer. Its records are encoded by the
// caller, off the committer's goroutine.
type request struct {
	g    *group
	kind byte
	buf  []byte
	// Entries: each record's index and offset in buf (records end where
	// the next begins).
	idx  []uint64
	offs []uint32
	// Set: the key and value.
	key string
	val []byte
	// Where buf landed; set by the committer.
	seg  *segment
	base uint32
	done chan error // nil: nobody waits (deletions)
	err  error      // the request's own outcome (its group was dropped)
}

// Open opens the log in dir, creating dir if needed, and replays its
// segments to rebuild the index. A record cut short at the end of the
// last segment (a crash during a write) is cut off; damage anywhere else
// is an error.
func Open(dir string, opts Options) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create wal dir: %w", err)
	}
	l := &Log{
		dir:       dir,
		segSize:   opts.SegmentSize,
		log:       opts.Logger,
		groups:    make(map[string]*group),
		wake:      make(chan struct{}, 1),
		stopped:   make(chan struct{}),
		closing:   make(chan struct{}),
		onFailure: opts.OnFailure,
	}
	if l.segSize <= 0 {
		l.segSize = DefaultSegmentSize
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.useDirect = !opts.Buffered && directSupported(dir)
	if !l.useDirect && !opts.Buffered {
		l.log.Info("wal: the file system takes no direct writes; writing through the page cache", "dir", dir)
	}
	ids, err := segmentIDs(dir)
	if err != nil {
		return nil, err
	}
	for k, id := range ids {
		if k > 0 && id != ids[k-1]+1 {
			l.closeFiles()
			return nil, fmt.Errorf("wal %s: segment %08x missing", dir, ids[k-1]+1)
		}
		if err := l.replay(id, k == len(ids)-1); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	if err := l.findSpares(); err != nil {
		l.closeFiles()
		return nil, err
	}
	if len(l.segs) == 0 {
		if _, err := l.newSegment(1); err != nil {
			l.closeFiles()
			return nil, err
		}
	} else if l.useDirect {
		if err := l.openDirect(l.segs[len(l.segs)-1]); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	l.reclaim()
	go l.run()
	return l, nil
}

func segmentIDs(dir string) ([]uint32, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for _, name := range names {
		id, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(name), ".wal"), 16, 32)
		if err != nil {
			continue // not ours
		}
		ids = append(ids, uint32(id))
	}
	slices.Sort(ids)
	return ids, nil
}

func (l *Log) segPath(id uint32) string {
	return filepath.Join(l.dir, fmt.Sprintf("%08x.wal", id))
}

// newSegment makes segment id, from a spare file if there is one, the one
// written to. The directory is synced so the name survives a crash.
func (l *Log) newSegment(id uint32) (*segment, error) {
	s := &segment{id: id}
	if n := len(l.spares); n > 0 {
		sp := l.spares[n-1]
		l.spares = l.spares[:n-1]
		if err := os.Rename(l.sparePath(sp.id), l.segPath(id)); err != nil {
			sp.f.Close()
			l.log.Warn("wal: reuse a spent segment file", "err", err)
		} else {
			// What the file holds is the earlier use's: salted with
			// another ID, it reads as the end of the segment.
			s.f, s.filled = sp.f, sp.filled
		}
	}
	if s.f == nil {
		f, err := os.OpenFile(l.segPath(id), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create wal segment: %w", err)
		}
		s.f = f
	}
	if err := l.syncDir(); err != nil {
		s.f.Close()
		return nil, err
	}
	if l.useDirect {
		if err := l.openDirect(s); err != nil {
			s.f.Close()
			return nil, err
		}
	}
	l.segs = append(l.segs, s)
	return s, nil
}

func (l *Log) syncDir() error {
	d, err := os.Open(l.dir)
	if err != nil {
		return nil // nothing to sync on this platform
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync wal dir: %w", err)
	}
	return nil
}

func (l *Log) sparePath(id uint32) string {
	return filepath.Join(l.dir, fmt.Sprintf("spare-%08x", id))
}

// retire removes spent segment s (the oldest), keeping its file as a
// spare while there are fewer than maxSpares.
func (l *Log) retire(s *segment) {
	if len(l.spares) < maxSpares && s.filled <= 2*l.segSize {
		if err := os.Rename(l.segPath(s.id), l.sparePath(s.id)); err == nil {
			l.spares = append(l.spares, s)
			return
		}
	}
	s.f.Close()
	if err := removeFile(l.segPath(s.id)); err != nil {
		l.log.Warn("wal: remove a spent segment", "err", err)
	}
}

// findSpares picks up the spare files a previous run left (removing any
// beyond maxSpares, or not of the expected size).
func (l *Log) findSpares() error {
	names, err := filepath.Glob(filepath.Join(l.dir, "spare-*"))
	if err != nil {
		return err
	}
	for _, name := range names {
		var id uint32
		if _, err := fmt.Sscanf(filepath.Base(name), "spare-%08x", &id); err != nil {
			continue // not ours
		}
		if len(l.spares) < maxSpares {
			if f, err := os.OpenFile(name, os.O_RDWR, 0); err == nil {
				if fi, err := f.Stat(); err == nil && fi.Size() <= 2*l.segSize {
					l.spares = append(l.spares, &segment{id: id, f: f, filled: fi.Size()})
					continue
				}
				f.Close()
			}
		}
		if err := removeFile(name); err != nil {
			return fmt.Errorf("remove wal spare: %w", err)
		}
	}
	return nil
}

// segOf returns segment id; ids are consecutive from the oldest.
func (l *Log) segOf(id uint32) *segment {
	return l.segs[id-l.segs[0].id]
}

// replay reads segment id into the index.
func (l *Log) replay(id uint32, last bool) error {
	path := l.segPath(id)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open wal segment: %w", err)
	}
	s := &segment{id: id, f: f}
	l.segs = append(l.segs, s)
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat wal segment: %w", err)
	}
	r := newSegmentReader(f, fi.Size(), salt(id))
	for {
		off := r.off
		rec, n, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if !last {
				// Only the last segment is ever written to: damage in
				// an earlier one is never a torn write (torn.go).
				return fmt.Errorf("%w: segment %s has a damaged record at offset %d (%v) and is not the last: "+
					"bytes that were synced have changed", ErrCorrupt, path, off, err)
			}
			if err := damaged(f, path, off, fi.Size(), salt(id), err); err != nil {
				return err // torn.go
			}
			l.log.Warn("wal: cutting off a torn record at the end of the log",
				"segment", path, "offset", off, "err", err)
			if err := f.Truncate(off); err != nil {
				return fmt.Errorf("truncate wal segment %s: %w", path, err)
			}
			break
		}
		l.apply(rec, s, loc{seg: id, off: uint32(off), n: uint32(n)})
	}
	s.size = r.off
	if fi.Size() > s.size {
		// Zeros after the last record (or a torn one just cut): writes
		// continue from the last good record.
		if err := f.Truncate(s.size); err != nil {
			return fmt.Errorf("truncate wal segment %s: %w", path, err)
		}
	}
	s.filled = s.size
	return nil
}

// apply replays one record into the index.
func (l *Log) apply(rec record, s *segment, at loc) {
	switch rec.kind {
	case kindEntry:
		g := l.groupFor(rec.group)
		if old, ok := g.put(rec.index, at); ok {
			l.dead(old)
		}
		s.live += int64(at.n)
	case kindDelete:
		if g := l.groups[string(rec.group)]; g != nil && rec.min <= rec.max {
			g.deleteRange(rec.min, rec.max, l.dead)
		}
	case kindSet:
		g := l.groupFor(rec.group)
		l.setStable(g, string(rec.key), slices.Clone(rec.val), s)
	case kindDrop:
		if g := l.groups[string(rec.group)]; g != nil {
			l.forget(g)
		}
	}
}

func (l *Log) groupFor(id []byte) *group {
	g := l.groups[string(id)]
	if g == nil {
		g = newGroup(string(id))
		l.groups[g.id] = g
	}
	return g
}

// dead accounts for an entry no longer in the index.
func (l *Log) dead(at loc) { l.segOf(at.seg).live -= int64(at.n) }

func (l *Log) setStable(g *group, key string, val []byte, s *segment) {
	if old, ok := g.stable[key]; ok {
		l.segOf(old.seg).stable--
	}
	g.stable[key] = stableVal{val: val, seg: s.id}
	s.stable++
}

// forget removes g from the index: dropped.
func (l *Log) forget(g *group) {
	g.dropped = true
	for _, r := range g.runs {
		for _, at := range r.locs {
			l.dead(at)
		}
	}
	g.runs = nil
	for _, v := range g.stable {
		l.segOf(v.seg).stable--
	}
	clear(g.stable)
	delete(l.groups, g.id)
}

// Close stops the committer, once the writes queued before are committed,
// and closes the files. Group handles must no longer be used.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.closing)
	l.mu.Unlock()
	l.signal()
	<-l.stopped
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closeFiles()
}

func (l *Log) closeFiles() error {
	var err error
	for _, s := range l.segs {
		err = errors.Join(err, s.closeDirect(), s.f.Close())
	}
	for _, sp := range l.spares {
		err = errors.Join(err, sp.f.Close())
	}
	return err
}

// Group returns the handle of group id, creating the group if needed.
func (l *Log) Group(id string) (*Group, error) {
	if id == "" {
		return nil, errors.New("wal: empty group ID")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	g := l.groups[id]
	if g == nil {
		g = newGroup(id)
		l.groups[id] = g
	}
	return &Group{l: l, g: g}, nil
}

// DropGroup deletes group id's entries and stable values, durably once it
// returns. Dropping a group that does not exist is not an error; the
// dropped group's handles fail from then on.
func (l *Log) DropGroup(id string) error {
	r := &request{kind: kindDrop, buf: appendDrop(nil, id), done: make(chan error, 1)}
	l.mu.Lock()
	g := l.groups[id]
	if g == nil {
		l.mu.Unlock()
		return nil
	}
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return err
	}
	l.forget(g)
	l.queue = append(l.queue, r)
	l.mu.Unlock()
	l.signal()
	if err := <-r.done; err != nil {
		return fmt.Errorf("drop wal group %s: %w", id, err)
	}
	return nil
}

// Groups lists the groups the log holds, sorted.
func (l *Log) Groups() []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	ids := make([]string, 0, len(l.groups))
	for id := range l.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Direct reports whether commits are direct writes (direct.go).
func (l *Log) Direct() bool { return l.useDirect }

// Commits is the number of batches written and synced so far.
func (l *Log) Commits() uint64 { return l.commits.Load() }

// Segments is the number of segment files.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

func (l *Log) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// usable tells whether writes are accepted; mu is held.
func (l *Log) usable() error {
	switch {
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return l.failed
	}
	return nil
}

// submit queues r for the committer and waits for its commit.
func (l *Log) submit(r *request) error {
	r.done = make(chan error, 1)
	if err := l.enqueue(r, nil); err != nil {
		return err
	}
	return <-r.done
}

// enqueue queues r for the committer, first running apply (if any) under
// the same lock, so that the index changes in the order the records are
// written. A request of a dropped group is refused.
func (l *Log) enqueue(r *request, apply func()) error {
	l.mu.Lock()
	err := l.usable()
	if err == nil && r.g.dropped {
		err = ErrNoGroup
	}
	if err != nil {
		l.mu.Unlock()
		if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoGroup) {
			return l.holdFailed(err)
		}
		return err
	}
	if apply != nil {
		apply()
	}
	l.queue = append(l.queue, r)
	l.mu.Unlock()
	l.signal()
	return nil
}
