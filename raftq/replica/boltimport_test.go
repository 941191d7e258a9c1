package replica

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/warrenmq/warren/raftq/wal"
)

// appendLog encodes an entry as earlier versions' bbolt logs did.
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

type oldGroup struct {
	logs   []*raft.Log
	stable map[string][]byte
}

// writeOldLog writes a bbolt log as earlier versions did: a per-queue
// file (one group, named "") or a node's file (a bucket per group).
func writeOldLog(t *testing.T, path string, groups map[string]oldGroup) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for name, g := range groups {
			var parent interface {
				CreateBucket([]byte) (*bolt.Bucket, error)
			} = tx
			if name != "" {
				b, err := tx.CreateBucket([]byte(name))
				if err != nil {
					return err
				}
				parent = b
			}
			logs, err := parent.CreateBucket(bucketLogs)
			if err != nil {
				return err
			}
			stable, err := parent.CreateBucket(bucketStable)
			if err != nil {
				return err
			}
			for _, l := range g.logs {
				if err := logs.Put(binary.BigEndian.AppendUint64(nil, l.Index), appendLog(nil, l)); err != nil {
					return err
				}
			}
			for k, v := range g.stable {
				if err := stable.Put([]byte(k), v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func oldEntries(tag byte, indexes ...uint64) []*raft.Log {
	at := time.Unix(1700000000, 123456789)
	var logs []*raft.Log
	for _, i := range indexes {
		l := &raft.Log{Index: i, Term: 1 + i/5, Type: raft.LogCommand, Data: []byte{tag, byte(i)}, AppendedAt: at}
		if i == 3 {
			l.Type, l.Data, l.Extensions = raft.LogConfiguration, nil, []byte("ext")
		}
		logs = append(logs, l)
	}
	return logs
}

func wantGroup(t *testing.T, w *wal.Log, id string, want oldGroup) {
	t.Helper()
	g, err := w.Group(id)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := g.FirstIndex()
	last, _ := g.LastIndex()
	if first != want.logs[0].Index || last != want.logs[len(want.logs)-1].Index {
		t.Fatalf("%s: bounds %d-%d", id, first, last)
	}
	present := map[uint64]*raft.Log{}
	for _, l := range want.logs {
		present[l.Index] = l
	}
	for i := first; i <= last; i++ {
		var got raft.Log
		err := g.GetLog(i, &got)
		if want := present[i]; want == nil {
			if !errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("%s: entry %d should be missing: %v", id, i, err)
			}
		} else if err != nil || !reflect.DeepEqual(&got, want) {
			t.Fatalf("%s: entry %d = %+v (%v), want %+v", id, i, got, err, *want)
		}
	}
	for k, v := range want.stable {
		if got, err := g.Get([]byte(k)); err != nil || string(got) != string(v) {
			t.Fatalf("%s: stable %s = %q (%v)", id, k, got, err)
		}
	}
}

// An upgraded node keeps its queues: a per-queue file and a node's shared
// file are read into the write-ahead log, sparse logs and stable values
// included, and the files go.
func TestImportBoltFiles(t *testing.T) {
	dir := t.TempDir()
	w, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	term := binary.BigEndian.AppendUint64(nil, 42)
	queueFile := oldGroup{logs: oldEntries('q', 1, 2, 3, 4, 7, 9, 10), stable: map[string][]byte{"CurrentTerm": term, "LastVoteCand": []byte("n1")}}
	perQueue := filepath.Join(dir, "log.db")
	writeOldLog(t, perQueue, map[string]oldGroup{"": queueFile})
	if err := importBoltFile(perQueue, w, "q"); err != nil {
		t.Fatal(err)
	}
	wantGroup(t, w, "q", queueFile)

	a := oldGroup{logs: oldEntries('a', 5, 6, 8), stable: map[string][]byte{"CurrentTerm": term}}
	b := oldGroup{logs: oldEntries('b', 1, 2), stable: map[string][]byte{}}
	node := filepath.Join(dir, "quorum-log.db")
	writeOldLog(t, node, map[string]oldGroup{"a": a, "b": b})
	if err := importBoltFile(node, w, ""); err != nil {
		t.Fatal(err)
	}
	wantGroup(t, w, "a", a)
	wantGroup(t, w, "b", b)
	for _, path := range []string{perQueue, node} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%s is still there: %v", path, err)
		}
	}
}

// liveLogStore deletes around the live messages, leaving a sparse log.
func TestLiveLogStoreKeepsLiveEntries(t *testing.T) {
	w, err := wal.Open(t.TempDir(), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s, _ := w.Group("q")
	if err := s.StoreLogs(oldEntries('q', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)); err != nil {
		t.Fatal(err)
	}
	if err := (&liveLogStore{LogStore: s, live: func(min, max uint64) []uint64 { return []uint64{4, 7} }}).DeleteRange(1, 8); err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 4 || last != 10 {
		t.Fatalf("after compaction first %d last %d, want 4 and 10", first, last)
	}
	for i, present := range map[uint64]bool{1: false, 3: false, 4: true, 5: false, 7: true, 8: false, 9: true} {
		var l raft.Log
		err := s.GetLog(i, &l)
		if present != (err == nil) || (!present && !errors.Is(err, raft.ErrLogNotFound)) {
			t.Fatalf("entry %d: err %v, want present=%v", i, err, present)
		}
	}
}

func TestDecodeLogRefusesGarbage(t *testing.T) {
	good := appendLog(nil, &raft.Log{Term: 3, Type: raft.LogCommand, Data: []byte("abc")})
	for cut := 0; cut < len(good); cut++ {
		var l raft.Log
		if err := decodeLog(1, good[:cut], &l); err == nil {
			t.Fatalf("truncated entry (%d of %d bytes) accepted", cut, len(good))
		}
	}
	var l raft.Log
	if err := decodeLog(1, append(good, 0), &l); err == nil {
		t.Fatal("trailing byte accepted")
	}
}
