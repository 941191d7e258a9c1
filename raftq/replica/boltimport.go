package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/warrenmq/warren/raftq/wal"
)

// Earlier Warren versions kept a queue group's Raft log in bbolt: a file
// per queue (Dir/log.db, buckets "logs" and "stable" at the top) and, on
// cluster nodes, one file per node (quorum/log.db, a top-level bucket per
// group holding the same two). Keys were big-endian indexes; an entry was
// term (uvarint), type (byte), appended-at (varint, Unix nanoseconds),
// data and extensions (uvarint length + bytes each). This file reads them
// into the write-ahead log once, so that an upgraded node keeps its
// queues.

var (
	bucketLogs   = []byte("logs")
	bucketStable = []byte("stable")
)

// importBoltFile copies the bbolt log at path into w and removes the file.
// group names the group of a per-queue file; "" reads a node's file, a
// group per top-level bucket. A group that already holds state (an import
// that did not get to remove the file) is left as it is.
func importBoltFile(path string, w *wal.Log, group string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		if group != "" {
			return importBoltGroup(tx.Bucket(bucketLogs), tx.Bucket(bucketStable), w, group)
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return importBoltGroup(b.Bucket(bucketLogs), b.Bucket(bucketStable), w, string(name))
		})
	})
	if err = errors.Join(err, db.Close()); err != nil {
		return fmt.Errorf("import %s: %w", path, err)
	}
	return os.Remove(path)
}

func importBoltGroup(logs, stable *bolt.Bucket, w *wal.Log, id string) error {
	g, err := w.Group(id)
	if err != nil {
		return err
	}
	if last, _ := g.LastIndex(); last > 0 {
		return nil
	}
	if _, err := g.Get([]byte("CurrentTerm")); err == nil {
		return nil
	}
	if logs != nil {
		var batch []*raft.Log
		flush := func() error {
			err := g.StoreLogs(batch)
			batch = batch[:0]
			return err
		}
		err := logs.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("group %s: log key %x: %w", id, k, errBadLog)
			}
			l := new(raft.Log)
			if err := decodeLog(binary.BigEndian.Uint64(k), v, l); err != nil {
				return fmt.Errorf("group %s: entry %x: %w", id, k, err)
			}
			if batch = append(batch, l); len(batch) == 256 {
				return flush()
			}
			return nil
		})
		if err == nil && len(batch) > 0 {
			err = flush()
		}
		if err != nil {
			return err
		}
	}
	if stable != nil {
		return stable.ForEach(func(k, v []byte) error { return g.Set(k, v) })
	}
	return nil
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

// OpenNodeWAL opens a node's write-ahead log in dataDir/wal, first moving
// into it the shared bbolt log (dataDir/quorum/log.db) an earlier version
// of a cluster node kept.
func OpenNodeWAL(dataDir string, log *slog.Logger, onFailure func(error)) (*wal.Log, error) {
	w, err := wal.Open(filepath.Join(dataDir, "wal"), wal.Options{Logger: log, OnFailure: onFailure})
	if err != nil {
		return nil, err
	}
	if old := filepath.Join(dataDir, "quorum", "log.db"); fileExists(old) {
		log.Info("moving the queues' bbolt log into the write-ahead log", "file", old)
		if err := importBoltFile(old, w, ""); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}
