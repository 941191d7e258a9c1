package replica

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// logStores opens the two kinds of store for the behaviour tests: each
// returns the store and a function that closes and reopens it.
var logStores = map[string]func(t *testing.T) (raftStore, func() raftStore){
	"boltLog": func(t *testing.T) (raftStore, func() raftStore) {
		path := filepath.Join(t.TempDir(), "log.db")
		s, err := openBoltLog(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, func() raftStore {
			s.Close()
			if s, err = openBoltLog(path); err != nil {
				t.Fatal(err)
			}
			return s
		}
	},
	"GroupLog": func(t *testing.T) (raftStore, func() raftStore) {
		path := filepath.Join(t.TempDir(), "log.db")
		s := openShared(t, path)
		// A neighbour group with overlapping indexes and keys: nothing
		// it holds may show through.
		other, err := s.Group("other")
		if err != nil {
			t.Fatal(err)
		}
		fill(t, other, 1, 20, "other")
		if err := other.SetUint64([]byte("CurrentTerm"), 99); err != nil {
			t.Fatal(err)
		}
		g, err := s.Group("g")
		if err != nil {
			t.Fatal(err)
		}
		return g, func() raftStore {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openShared(t, path)
			g, err := s.Group("g")
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
	},
}

func openShared(t *testing.T, path string) *SharedLog {
	t.Helper()
	s, err := OpenSharedLog(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fill stores entries from..to, one StoreLogs each, with data naming tag.
func fill(t *testing.T, s raft.LogStore, from, to uint64, tag string) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := s.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("%s-%d", tag, i))}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogStoreBehaviour checks what raft relies on, for the per-queue
// file and for a group of the shared log alike.
func TestLogStoreBehaviour(t *testing.T) {
	for name, open := range logStores {
		t.Run(name, func(t *testing.T) {
			s, reopen := open(t)
			first, err1 := s.FirstIndex()
			last, err2 := s.LastIndex()
			if first != 0 || last != 0 || err1 != nil || err2 != nil {
				t.Fatalf("empty store: first %d (%v) last %d (%v), want 0 and 0", first, err1, last, err2)
			}
			var l raft.Log
			if err := s.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("GetLog on an empty store: %v, want ErrLogNotFound", err)
			}
			at := time.Unix(1700000000, 123456789)
			var logs []*raft.Log
			for i := uint64(1); i <= 10; i++ {
				l := &raft.Log{Index: i, Term: 1 + i/5, Type: raft.LogCommand, Data: []byte{byte(i), 2, 3}, AppendedAt: at}
				if i == 3 {
					l.Type, l.Data, l.Extensions = raft.LogConfiguration, nil, []byte("ext")
				}
				logs = append(logs, l)
			}
			if err := s.StoreLogs(logs[:9]); err != nil {
				t.Fatal(err)
			}
			if err := s.StoreLog(logs[9]); err != nil {
				t.Fatal(err)
			}
			for _, want := range logs {
				var got raft.Log
				if err := s.GetLog(want.Index, &got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(&got, want) {
					t.Fatalf("entry %d: got %+v want %+v", want.Index, got, *want)
				}
			}
			if err := s.GetLog(11, &l); !errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("GetLog past the end: %v, want ErrLogNotFound", err)
			}

			// A sparse log after live-index compaction: keep 4 and 7.
			live := &liveLogStore{LogStore: s, live: func(min, max uint64) []uint64 { return []uint64{4, 7} }}
			if err := live.DeleteRange(1, 8); err != nil {
				t.Fatal(err)
			}
			first, _ = s.FirstIndex()
			last, _ = s.LastIndex()
			if first != 4 || last != 10 {
				t.Fatalf("after compaction first %d last %d, want 4 and 10", first, last)
			}
			for i := uint64(1); i <= 10; i++ {
				present := i == 4 || i == 7 || i >= 9
				err := s.GetLog(i, &l)
				if present != (err == nil) || (!present && !errors.Is(err, raft.ErrLogNotFound)) {
					t.Fatalf("entry %d: err %v, want present=%v", i, err, present)
				}
			}
			// Truncating the tail (a follower's conflicting entries).
			if err := s.DeleteRange(9, 10); err != nil {
				t.Fatal(err)
			}
			if last, _ = s.LastIndex(); last != 7 {
				t.Fatalf("after truncating the tail last %d, want 7", last)
			}

			if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
				t.Fatalf("missing stable key: %v, want \"not found\"", err)
			}
			if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
				t.Fatalf("missing stable key as uint64: %v, want \"not found\"", err)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
				t.Fatal(err)
			}
			val := []byte("n1")
			if err := s.Set([]byte("LastVoteCand"), val); err != nil {
				t.Fatal(err)
			}
			val[0] = 'x' // the store copied it

			s = reopen()
			if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 42 {
				t.Fatalf("term after reopen: %d %v", v, err)
			}
			if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "n1" {
				t.Fatalf("vote after reopen: %q %v", v, err)
			}
			first, _ = s.FirstIndex()
			last, _ = s.LastIndex()
			if first != 4 || last != 7 {
				t.Fatalf("after reopen first %d last %d, want 4 and 7", first, last)
			}
			if err := s.DeleteRange(0, 100); err != nil {
				t.Fatal(err)
			}
			first, _ = s.FirstIndex()
			last, _ = s.LastIndex()
			if first != 0 || last != 0 {
				t.Fatalf("after deleting everything first %d last %d, want 0 and 0", first, last)
			}
		})
	}
}

func TestSharedLogGroupsIsolated(t *testing.T) {
	s := openShared(t, filepath.Join(t.TempDir(), "log.db"))
	a, _ := s.Group("a")
	b, _ := s.Group("b")
	fill(t, a, 1, 10, "a")
	fill(t, b, 5, 20, "b")
	a.SetUint64([]byte("k"), 1)
	if err := a.DeleteRange(1, 100); err != nil {
		t.Fatal(err)
	}
	if first, _ := b.FirstIndex(); first != 5 {
		t.Fatalf("b's first index %d after a's entries went, want 5", first)
	}
	if last, _ := b.LastIndex(); last != 20 {
		t.Fatalf("b's last index %d, want 20", last)
	}
	var l raft.Log
	if err := b.GetLog(7, &l); err != nil || string(l.Data) != "b-7" {
		t.Fatalf("b's entry 7: %q %v", l.Data, err)
	}
	if _, err := b.Get([]byte("k")); err == nil {
		t.Fatal("a's stable key seen in b")
	}
}

func TestSharedLogDropGroup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s := openShared(t, path)
	a, _ := s.Group("a")
	b, _ := s.Group("b")
	fill(t, a, 1, 10, "a")
	fill(t, b, 1, 10, "b")
	if err := s.DropGroup("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DropGroup("never"); err != nil {
		t.Fatalf("dropping an unknown group: %v", err)
	}
	if ids, _ := s.Groups(); !slices.Equal(ids, []string{"b"}) {
		t.Fatalf("groups %v after dropping a, want [b]", ids)
	}
	if err := a.StoreLog(&raft.Log{Index: 11, Term: 1}); !errors.Is(err, errNoGroup) {
		t.Fatalf("writing to a dropped group: %v, want errNoGroup", err)
	}
	if _, err := a.LastIndex(); !errors.Is(err, errNoGroup) {
		t.Fatalf("reading a dropped group: %v, want errNoGroup", err)
	}
	if last, _ := b.LastIndex(); last != 10 {
		t.Fatalf("b's last index %d, want 10", last)
	}
	a, _ = s.Group("a") // a new queue by the same name starts empty
	if last, _ := a.LastIndex(); last != 0 {
		t.Fatalf("recreated group's last index %d, want 0", last)
	}
	s.Close()
	s = openShared(t, path)
	if ids, _ := s.Groups(); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("groups %v after reopen", ids)
	}
}

// TestSharedLogBatchAtomicity commits one batch by hand: a request that
// fails (half-applied) leaves nothing behind and fails alone; the others
// of its batch are committed.
func TestSharedLogBatchAtomicity(t *testing.T) {
	s := openShared(t, filepath.Join(t.TempDir(), "log.db"))
	a, _ := s.Group("a")
	b, _ := s.Group("b")
	gone, _ := s.Group("gone")
	s.DropGroup("gone")
	req := func(g *GroupLog, keys ...[]byte) *writeReq {
		r := &writeReq{group: g.name, kind: reqStoreLogs, done: make(chan error, 1)}
		for _, k := range keys {
			r.keys = append(r.keys, k)
			r.vals = append(r.vals, appendLog(nil, &raft.Log{Term: 1, Data: []byte("x")}))
		}
		return r
	}
	batch := []*writeReq{
		req(a, indexKey(1), indexKey(2)),
		req(b, indexKey(1), nil), // the empty key fails on the second Put
		req(gone, indexKey(1)),
		req(b, indexKey(3)),
	}
	s.commit(slices.Clone(batch))
	for i, wantErr := range []bool{false, true, true, false} {
		if err := <-batch[i].done; (err != nil) != wantErr {
			t.Fatalf("request %d: %v, want error %v", i, err, wantErr)
		}
	}
	var l raft.Log
	if err := b.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("first entry of the failed request: %v, want ErrLogNotFound", err)
	}
	if last, _ := a.LastIndex(); last != 2 {
		t.Fatalf("a's last index %d, want 2", last)
	}
	if last, _ := b.LastIndex(); last != 3 {
		t.Fatalf("b's last index %d, want 3", last)
	}
}

// TestSharedLogDeleteAfterWriteInOneBatch: a DeleteRange batched after a
// write that touched the same pages deletes every entry in its range.
func TestSharedLogDeleteAfterWriteInOneBatch(t *testing.T) {
	s := openShared(t, filepath.Join(t.TempDir(), "log.db"))
	g, _ := s.Group("g")
	var logs []*raft.Log
	for i := uint64(1); i <= 2000; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: bytes.Repeat([]byte{'x'}, 100)})
	}
	if err := g.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	rewrite := &writeReq{group: g.name, kind: reqStoreLogs, done: make(chan error, 1)}
	for i := uint64(1); i <= 2000; i += 7 {
		rewrite.keys = append(rewrite.keys, indexKey(i))
		rewrite.vals = append(rewrite.vals, appendLog(nil, logs[i-1]))
	}
	del := &writeReq{group: g.name, kind: reqDeleteRange, min: 1, max: 1990, done: make(chan error, 1)}
	s.commit([]*writeReq{rewrite, del})
	if err := errors.Join(<-rewrite.done, <-del.done); err != nil {
		t.Fatal(err)
	}
	first, _ := g.FirstIndex()
	last, _ := g.LastIndex()
	if first != 1991 || last != 2000 {
		t.Fatalf("first %d last %d, want 1991 and 2000", first, last)
	}
}

func TestSharedLogClosed(t *testing.T) {
	s, err := OpenSharedLog(filepath.Join(t.TempDir(), "log.db"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := s.Group("g")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := g.StoreLog(&raft.Log{Index: 1}); !errors.Is(err, ErrSharedLogClosed) {
		t.Fatalf("write after Close: %v, want ErrSharedLogClosed", err)
	}
}

// TestSharedLogConcurrent: many groups written and read at once (run it
// with -race); every write lands, and they share transactions.
func TestSharedLogConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s := openShared(t, path)
	const groups, entries = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	for gi := range groups {
		g, err := s.Group(fmt.Sprintf("g%d", gi))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() { // the leader loop: entries, a term now and then
			defer wg.Done()
			for i := uint64(1); i <= entries; i++ {
				if err := g.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: []byte{byte(gi), byte(i)}}}); err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					if err := g.SetUint64([]byte("CurrentTerm"), i); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
		go func() { // compaction and reads, behind the writer
			defer wg.Done()
			var l raft.Log
			for done := uint64(0); done < entries-10; {
				last, err := g.LastIndex()
				if err != nil {
					errs <- err
					return
				}
				if last > done+10 {
					if err := g.DeleteRange(done+1, last-10); err != nil {
						errs <- err
						return
					}
					done = last - 10
				}
				if err := g.GetLog(last, &l); last > 0 && err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.Close()
	s = openShared(t, path)
	for gi := range groups {
		g, _ := s.Group(fmt.Sprintf("g%d", gi))
		last, _ := g.LastIndex()
		term, err := g.GetUint64([]byte("CurrentTerm"))
		var l raft.Log
		if last != entries || err != nil || term != entries || g.GetLog(entries, &l) != nil || l.Data[0] != byte(gi) {
			t.Fatalf("group %d: last %d term %d (%v) entry %v", gi, last, term, err, l.Data)
		}
	}
}

// TestOpenMovesQueueFileIntoSharedLog: a queue whose log is a file of its
// own (a node from before the shared log) keeps its messages when opened
// on the shared log, and the file goes.
func TestOpenMovesQueueFileIntoSharedLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	r := openTest(t, nil, dir, nil)
	enqueue(t, r, 20)
	r.Close()
	node := sharedLog.node(t)
	r = openTest(t, node, dir, nil)
	defer r.Close()
	if st := r.Stats(); st.Ready != 20 {
		t.Fatalf("%d ready on the shared log, want 20", st.Ready)
	}
	if _, err := os.Stat(filepath.Join(dir, "log.db")); !os.IsNotExist(err) {
		t.Fatalf("the queue's own log file is still there: %v", err)
	}
	d, _, ok, err := r.Get(true)
	if err != nil || !ok || string(d.Message.Body) != "m0" {
		t.Fatalf("first message: %q %v %v", d.Message.Body, ok, err)
	}
}
