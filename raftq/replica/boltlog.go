package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// boltLog is a queue group's Raft log and stable store in one bbolt file,
// with a compact binary encoding of entries. raft-boltdb encodes every
// entry with reflection-driven msgpack, which cost a third of a quorum
// queue's CPU under load; this encoding is a few appends.
//
// Entry layout: term (uvarint), type (byte), appended-at (varint, Unix
// nanoseconds), data (uvarint length + bytes), extensions (uvarint length +
// bytes). Keys are big-endian indexes, so bbolt's order is the log's.
type boltLog struct {
	db *bolt.DB
}

var (
	bucketLogs   = []byte("logs")
	bucketStable = []byte("stable")
)

var _ raft.LogStore = (*boltLog)(nil)
var _ raft.StableStore = (*boltLog)(nil)

func openBoltLog(path string) (*boltLog, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: 5 * time.Second,
		// The freelist is rebuilt on open rather than written with every
		// commit: fewer pages per fsync on the hot path.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketLogs); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bucketStable)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("create buckets in %s: %w", path, err)
	}
	return &boltLog{db: db}, nil
}

func (s *boltLog) Close() error { return s.db.Close() }

func indexKey(i uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], i)
	return k[:]
}

func (s *boltLog) FirstIndex() (uint64, error) {
	var first uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLogs).Cursor().First(); k != nil {
			first = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return first, err
}

func (s *boltLog) LastIndex() (uint64, error) {
	var last uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLogs).Cursor().Last(); k != nil {
			last = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return last, err
}

func (s *boltLog) GetLog(index uint64, l *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(indexKey(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		// v is valid only inside the transaction: decodeLog copies.
		return decodeLog(index, v, l)
	})
}

func (s *boltLog) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs writes a batch in one transaction: one fsync however many
// entries raft hands over at once.
func (s *boltLog) StoreLogs(logs []*raft.Log) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		// Indexes only grow: pack pages full instead of leaving room
		// for inserts that never come (bbolt's advice for sequential
		// keys), which means fewer pages written per fsync.
		b.FillPercent = 1.0
		var buf []byte
		for _, l := range logs {
			buf = appendLog(buf[:0], l)
			// bbolt keeps the slices until commit: give each its own.
			if err := b.Put(indexKey(l.Index), append([]byte(nil), buf...)); err != nil {
				return fmt.Errorf("store log %d: %w", l.Index, err)
			}
		}
		return nil
	})
}

func (s *boltLog) DeleteRange(min, max uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		for k, _ := c.Seek(indexKey(min)); k != nil && binary.BigEndian.Uint64(k) <= max; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *boltLog) Set(key, val []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStable).Put(key, append([]byte(nil), val...))
	})
}

// errNotFound is what raft expects from a stable store for a missing key:
// it tests the message, as raft-boltdb's "not found".
var errNotFound = errors.New("not found")

func (s *boltLog) Get(key []byte) ([]byte, error) {
	var val []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketStable).Get(key)
		if v == nil {
			return errNotFound
		}
		val = append([]byte(nil), v...)
		return nil
	})
	return val, err
}

func (s *boltLog) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (s *boltLog) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	return stableUint64(key, v, err)
}

// stableUint64 decodes a stable-store value written by SetUint64 (both
// stores' GetUint64).
func stableUint64(key, v []byte, err error) (uint64, error) {
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("stable key %q: %d bytes, want 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func appendLog(buf []byte, l *raft.Log) []byte {
	buf = binary.AppendUvarint(buf, l.Term)
	buf = append(buf, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	buf = binary.AppendVarint(buf, at)
	buf = binary.AppendUvarint(buf, uint64(len(l.Data)))
	buf = append(buf, l.Data...)
	buf = binary.AppendUvarint(buf, uint64(len(l.Extensions)))
	return append(buf, l.Extensions...)
}

var errBadLog = errors.New("replica: malformed log entry")

func decodeLog(index uint64, v []byte, l *raft.Log) error {
	term, n := binary.Uvarint(v)
	if n <= 0 || len(v) < n+1 {
		return errBadLog
	}
	v = v[n:]
	typ := raft.LogType(v[0])
	v = v[1:]
	at, n := binary.Varint(v)
	if n <= 0 {
		return errBadLog
	}
	v = v[n:]
	bytesField := func() ([]byte, bool) {
		size, n := binary.Uvarint(v)
		if n <= 0 || uint64(len(v)-n) < size {
			return nil, false
		}
		b := v[n : n+int(size)]
		v = v[n+int(size):]
		if size == 0 {
			return nil, true
		}
		return append([]byte(nil), b...), true
	}
	data, ok := bytesField()
	if !ok {
		return errBadLog
	}
	ext, ok := bytesField()
	if !ok || len(v) != 0 {
		return errBadLog
	}
	*l = raft.Log{Index: index, Term: term, Type: typ, Data: data, Extensions: ext}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	return nil
}
