package replica

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestBoltLogStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openBoltLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := s.FirstIndex(); first != 0 {
		t.Fatalf("empty store first index %d", first)
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
	// A sparse log after live-index compaction: keep 4 and 7.
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

	if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing stable key: %v", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n1")); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = openBoltLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 42 {
		t.Fatalf("term after reopen: %d %v", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "n1" {
		t.Fatalf("vote after reopen: %q %v", v, err)
	}
	if last, _ := s.LastIndex(); last != 10 {
		t.Fatalf("last index after reopen %d", last)
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
