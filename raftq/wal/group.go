package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Group is one Raft group's log and stable store in a Log.
type Group struct {
	l *Log
	g *group
}

var _ raft.LogStore = (*Group)(nil)
var _ raft.StableStore = (*Group)(nil)

// errNotFound is what raft expects (by its text) for a missing stable key.
var errNotFound = errors.New("not found")

func (h *Group) FirstIndex() (uint64, error) {
	h.l.mu.RLock()
	defer h.l.mu.RUnlock()
	if h.g.dropped {
		return 0, ErrNoGroup
	}
	return h.g.firstIndex(), nil
}

func (h *Group) LastIndex() (uint64, error) {
	h.l.mu.RLock()
	defer h.l.mu.RUnlock()
	if h.g.dropped {
		return 0, ErrNoGroup
	}
	return h.g.lastIndex(), nil
}

// GetLog reads entry index back from its segment. The entry's Data and
// Extensions are a fresh buffer of their own.
func (h *Group) GetLog(index uint64, out *raft.Log) error {
	h.l.mu.RLock()
	if h.g.dropped {
		h.l.mu.RUnlock()
		return ErrNoGroup
	}
	at, ok := h.g.find(index)
	if !ok {
		h.l.mu.RUnlock()
		return raft.ErrLogNotFound
	}
	buf := make([]byte, at.n)
	// Under the read lock: the committer removes segments under the
	// write lock.
	_, err := h.l.segOf(at.seg).f.ReadAt(buf, int64(at.off))
	h.l.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("wal: read entry %d of %s: %w", index, h.g.id, err)
	}
	size, crc := readHeader(buf)
	if size != len(buf)-headerSize {
		return fmt.Errorf("wal: entry %d of %s: %w", index, h.g.id, errCorrupt)
	}
	rec, err := decodePayload(buf[headerSize:], crc^salt(at.seg))
	if err == nil && (rec.kind != kindEntry || rec.index != index || string(rec.group) != h.g.id) {
		err = errCorrupt
	}
	if err == nil {
		err = decodeEntry(index, rec.rest, out)
	}
	if err != nil {
		return fmt.Errorf("wal: entry %d of %s: %w", index, h.g.id, err)
	}
	return nil
}

func (h *Group) StoreLog(l *raft.Log) error { return h.StoreLogs([]*raft.Log{l}) }

// StoreLogs writes logs in the next batch: atomically, and durably once it
// returns nil.
func (h *Group) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	size := 0
	for _, l := range logs {
		size += headerSize + 40 + len(h.g.id) + len(l.Data) + len(l.Extensions)
	}
	r := &request{
		g:    h.g,
		kind: kindEntry,
		buf:  make([]byte, 0, size),
		idx:  make([]uint64, len(logs)),
		offs: make([]uint32, len(logs)),
	}
	for k, l := range logs {
		r.idx[k], r.offs[k] = l.Index, uint32(len(r.buf))
		r.buf = appendEntry(r.buf, h.g.id, l)
	}
	return h.l.submit(r)
}

// DeleteRange deletes the entries with indexes in [min, max]. The index
// forgets them at once; the record saying so is written with the next
// commit, not waited for: if it is lost in a crash, the entries come back
// as they were, which Raft copes with (they were committed, or are cut
// again by the leader).
func (h *Group) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	r := &request{g: h.g, kind: kindDelete, buf: appendDelete(nil, h.g.id, min, max)}
	return h.l.enqueue(r, func() { h.g.deleteRange(min, max, h.l.dead) })
}

func (h *Group) Set(key, val []byte) error {
	if cur, err := h.Get(key); err == nil && bytes.Equal(cur, val) {
		return nil // unchanged: no commit, no fsync
	}
	v := append([]byte{}, val...)
	return h.l.submit(&request{g: h.g, kind: kindSet, key: string(key), val: v,
		buf: appendSet(nil, h.g.id, key, v)})
}

// Get returns the value of key, or an error reading "not found" (what
// raft tests for) when there is none.
func (h *Group) Get(key []byte) ([]byte, error) {
	h.l.mu.RLock()
	defer h.l.mu.RUnlock()
	if h.g.dropped {
		return nil, ErrNoGroup
	}
	v, ok := h.g.stable[string(key)]
	if !ok {
		return nil, errNotFound
	}
	return append([]byte(nil), v.val...), nil
}

func (h *Group) SetUint64(key []byte, val uint64) error {
	if val == 0 {
		// raft reads a missing key as 0: a new member's NewRaft "saves"
		// its term 0, which would otherwise cost a commit per queue
		// opened.
		if _, err := h.Get(key); errors.Is(err, errNotFound) {
			return nil
		}
	}
	return h.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (h *Group) GetUint64(key []byte) (uint64, error) {
	v, err := h.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("wal: stable value %q of %s is %d bytes, want 8", key, h.g.id, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
