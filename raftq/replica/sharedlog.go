package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// SharedLog is a node's Raft log and stable store for every queue group it
// holds, in one bbolt file: a top-level bucket per group, holding the
// "logs" and "stable" buckets of boltLog with the same keys and entry
// encoding.
//
// Its point is group commit. With a file per group, every group pays a
// transaction and an fsync per StoreLogs; here one committer goroutine
// takes every write waiting (of any group), applies them all in one
// transaction, commits it with one fsync and answers them all. No timer is
// involved: a lone writer is served at once, and the writes that arrive
// while a commit is in its fsync form the next batch. Reads go to bbolt
// directly (db.View), concurrently with the committer.
//
// Failure handling: each write request (a StoreLogs, a DeleteRange, a Set)
// is all or nothing. When applying one request fails (its group was
// dropped, say), the transaction is rolled back, that request alone is
// answered with the error, and the rest of the batch is applied again in a
// new transaction. When the commit itself fails (a write or fsync error),
// every request of the batch gets the error and none is retried: after a
// failed fsync the file's state is unknown, and raft treats a failed store
// as the member's failure.
type SharedLog struct {
	db *bolt.DB

	mu     sync.Mutex
	queue  []*writeReq // waiting for the committer
	closed bool
	// wake (capacity one) tells the committer the queue has work; a
	// token left in it while a commit runs makes the next batch.
	wake    chan struct{}
	stopped chan struct{}

	commits  atomic.Uint64 // transactions committed or tried: one fsync each
	requests atomic.Uint64 // write requests answered
}

// ErrSharedLogClosed answers writes to a SharedLog after Close.
var ErrSharedLogClosed = errors.New("replica: shared log closed")

// errNoGroup is the error for a group whose buckets are gone (dropped).
var errNoGroup = errors.New("replica: no such log group")

// OpenSharedLog opens (creating it and its directory if needed) the node's
// shared log at path.
func OpenSharedLog(path string) (*SharedLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create shared log dir: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        5 * time.Second,
		NoFreelistSync: true, // as boltLog: fewer pages per fsync
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &SharedLog{db: db, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go s.run()
	return s, nil
}

// Close stops the committer, once the writes queued before are committed,
// and closes the file. The groups' handles must no longer be used.
func (s *SharedLog) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.signal()
	<-s.stopped
	return s.db.Close()
}

// Group returns the log and stable store of group id, creating its buckets
// if they do not exist yet.
func (s *SharedLog) Group(id string) (*GroupLog, error) {
	if id == "" {
		return nil, errors.New("replica: empty log group ID")
	}
	name := []byte(id)
	err := s.db.Update(func(tx *bolt.Tx) error {
		g, err := tx.CreateBucketIfNotExists(name)
		if err != nil {
			return err
		}
		if _, err := g.CreateBucketIfNotExists(bucketLogs); err != nil {
			return err
		}
		_, err = g.CreateBucketIfNotExists(bucketStable)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create log group %s: %w", id, err)
	}
	return &GroupLog{s: s, name: name}, nil
}

// DropGroup deletes group id's log and stable store: its queue is gone.
// Dropping a group that does not exist is not an error. Writes to a
// dropped group fail; its handle must not be used again.
func (s *SharedLog) DropGroup(id string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		err := tx.DeleteBucket([]byte(id))
		if errors.Is(err, bolt.ErrBucketNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("drop log group %s: %w", id, err)
	}
	return nil
}

// Groups lists the groups the log holds, for removing those of queues
// deleted while the node was away.
func (s *SharedLog) Groups() ([]string, error) {
	var ids []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			ids = append(ids, string(name))
			return nil
		})
	})
	return ids, err
}

// importFile copies a group's per-queue log file (boltLog) into group id,
// unless the group already holds state (an import that committed but did
// not get to remove the file). The caller removes the file afterwards.
func (s *SharedLog) importFile(id, path string) error {
	old, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer old.Close()
	return old.View(func(from *bolt.Tx) error {
		return s.db.Update(func(tx *bolt.Tx) error {
			g := tx.Bucket([]byte(id))
			if g == nil {
				return fmt.Errorf("%w: %s", errNoGroup, id)
			}
			for _, name := range [][]byte{bucketLogs, bucketStable} {
				if k, _ := g.Bucket(name).Cursor().First(); k != nil {
					return nil // imported before
				}
			}
			for _, name := range [][]byte{bucketLogs, bucketStable} {
				src, dst := from.Bucket(name), g.Bucket(name)
				if src == nil {
					continue
				}
				dst.FillPercent = 1.0
				err := src.ForEach(func(k, v []byte) error {
					return dst.Put(slices.Clone(k), slices.Clone(v))
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	})
}

type reqKind uint8

const (
	reqStoreLogs reqKind = iota
	reqDeleteRange
	reqSet
)

// writeReq is one write waiting for the committer. Its keys and values
// are encoded by the caller, off the committer's goroutine, and stay
// untouched until done is answered (bbolt holds them until commit).
type writeReq struct {
	group    []byte
	kind     reqKind
	keys     [][]byte
	vals     [][]byte
	min, max uint64
	done     chan error
}

func (s *SharedLog) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// submit queues r for the committer and waits for its answer.
func (s *SharedLog) submit(r *writeReq) error {
	r.done = make(chan error, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrSharedLogClosed
	}
	s.queue = append(s.queue, r)
	s.mu.Unlock()
	s.signal()
	return <-r.done
}

// run is the committer: it takes every request waiting and commits them
// together. A batch taken after Close set closed is the last: nothing can
// be queued after it.
func (s *SharedLog) run() {
	defer close(s.stopped)
	var batch []*writeReq
	for range s.wake {
		s.mu.Lock()
		batch, s.queue = s.queue, batch[:0]
		closed := s.closed
		s.mu.Unlock()
		if len(batch) > 0 {
			s.commit(batch)
			clear(batch) // drop the references for the collector
		}
		if closed {
			return
		}
	}
}

// commit applies batch in one transaction, leaving out (and answering)
// any request that fails to apply, as the type's comment describes.
func (s *SharedLog) commit(batch []*writeReq) {
	for len(batch) > 0 {
		bad := -1
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i, r := range batch {
				if err := r.apply(tx); err != nil {
					bad = i
					return err
				}
			}
			return nil
		})
		s.commits.Add(1)
		if bad < 0 {
			for _, r := range batch {
				r.done <- err
			}
			s.requests.Add(uint64(len(batch)))
			return
		}
		batch[bad].done <- err
		s.requests.Add(1)
		batch = append(slices.Clip(batch[:bad]), batch[bad+1:]...)
	}
}

func (r *writeReq) apply(tx *bolt.Tx) error {
	g := tx.Bucket(r.group)
	if g == nil {
		return fmt.Errorf("%w: %s", errNoGroup, r.group)
	}
	switch r.kind {
	case reqStoreLogs:
		b := g.Bucket(bucketLogs)
		b.FillPercent = 1.0 // indexes only grow: pack pages full
		for i, k := range r.keys {
			if err := b.Put(k, r.vals[i]); err != nil {
				return fmt.Errorf("store log %x: %w", k, err)
			}
		}
	case reqDeleteRange:
		// Seek again after every delete instead of Next: when an earlier
		// request of the same transaction has already touched the leaf,
		// Next after Delete would skip a key.
		c := g.Bucket(bucketLogs).Cursor()
		for k, _ := c.Seek(indexKey(r.min)); k != nil; k, _ = c.Seek(indexKey(binary.BigEndian.Uint64(k) + 1)) {
			i := binary.BigEndian.Uint64(k)
			if i > r.max {
				break
			}
			if err := c.Delete(); err != nil {
				return err
			}
			if i == r.max { // also keeps i+1 from wrapping
				break
			}
		}
	case reqSet:
		return g.Bucket(bucketStable).Put(r.keys[0], r.vals[0])
	}
	return nil
}

// GroupLog is one group's raft.LogStore and raft.StableStore in a
// SharedLog. Writes go through the committer; reads read the file.
type GroupLog struct {
	s    *SharedLog
	name []byte
}

var _ raft.LogStore = (*GroupLog)(nil)
var _ raft.StableStore = (*GroupLog)(nil)

// view runs fn on the group's buckets in a read transaction.
func (g *GroupLog) view(fn func(logs, stable *bolt.Bucket) error) error {
	return g.s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(g.name)
		if b == nil {
			return fmt.Errorf("%w: %s", errNoGroup, g.name)
		}
		return fn(b.Bucket(bucketLogs), b.Bucket(bucketStable))
	})
}

func (g *GroupLog) FirstIndex() (uint64, error) {
	var first uint64
	err := g.view(func(logs, _ *bolt.Bucket) error {
		if k, _ := logs.Cursor().First(); k != nil {
			first = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return first, err
}

func (g *GroupLog) LastIndex() (uint64, error) {
	var last uint64
	err := g.view(func(logs, _ *bolt.Bucket) error {
		if k, _ := logs.Cursor().Last(); k != nil {
			last = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return last, err
}

func (g *GroupLog) GetLog(index uint64, l *raft.Log) error {
	return g.view(func(logs, _ *bolt.Bucket) error {
		v := logs.Get(indexKey(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		return decodeLog(index, v, l) // copies out of the transaction
	})
}

func (g *GroupLog) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// StoreLogs writes logs in the next batch: atomically, and durably once it
// returns nil.
func (g *GroupLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	// One buffer for every key and one for every value; sliced once the
	// values are all appended, since appending may move the buffer.
	keys := make([]byte, 8*len(logs))
	ends := make([]int, len(logs))
	size := 0
	for _, l := range logs {
		size += 24 + len(l.Data) + len(l.Extensions)
	}
	buf := make([]byte, 0, size)
	for i, l := range logs {
		binary.BigEndian.PutUint64(keys[8*i:], l.Index)
		buf = appendLog(buf, l)
		ends[i] = len(buf)
	}
	r := &writeReq{group: g.name, kind: reqStoreLogs, keys: make([][]byte, len(logs)), vals: make([][]byte, len(logs))}
	start := 0
	for i, end := range ends {
		r.keys[i] = keys[8*i : 8*i+8 : 8*i+8]
		r.vals[i] = buf[start:end:end]
		start = end
	}
	return g.s.submit(r)
}

// DeleteRange deletes the entries with indexes in [min, max].
func (g *GroupLog) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	return g.s.submit(&writeReq{group: g.name, kind: reqDeleteRange, min: min, max: max})
}

func (g *GroupLog) Set(key, val []byte) error {
	if cur, err := g.Get(key); err == nil && bytes.Equal(cur, val) {
		return nil // unchanged: no commit, no fsync
	}
	return g.s.submit(&writeReq{group: g.name, kind: reqSet,
		keys: [][]byte{slices.Clone(key)}, vals: [][]byte{append([]byte{}, val...)}})
}

// Get returns the value of key, or an error reading "not found" (what
// raft tests for, as with boltLog) when there is none.
func (g *GroupLog) Get(key []byte) ([]byte, error) {
	var val []byte
	err := g.view(func(_, stable *bolt.Bucket) error {
		v := stable.Get(key)
		if v == nil {
			return errNotFound
		}
		val = append([]byte(nil), v...)
		return nil
	})
	return val, err
}

func (g *GroupLog) SetUint64(key []byte, val uint64) error {
	if val == 0 {
		// raft reads a missing key as 0: a new member's NewRaft "saves"
		// its term 0, which would otherwise cost a commit per queue
		// opened.
		if _, err := g.Get(key); errors.Is(err, errNotFound) {
			return nil
		}
	}
	return g.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (g *GroupLog) GetUint64(key []byte) (uint64, error) {
	v, err := g.Get(key)
	return stableUint64(key, v, err)
}
