package wal

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestFullDiskStopsWritesAndKeepsWhatWasSynced fills a small tmpfs under
// the log: the failure is reported once, the write that hit it and every
// later one wait for good (raft sees no error; the node exits), and once
// there is room again the log reopens with every entry that was
// acknowledged.
func TestFullDiskStopsWritesAndKeepsWhatWasSynced(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })

	failed := make(chan error, 2)
	l, err := Open(dir, Options{SegmentSize: 1 << 20, OnFailure: func(err error) { failed <- err }})
	if err != nil {
		t.Fatal(err)
	}
	g := groupT(t, l, "q")
	body := bytes.Repeat([]byte("x"), 32<<10)
	acked := make(chan uint64, 1024)
	writeErr := make(chan error, 1)
	go func() {
		for i := uint64(1); ; i++ {
			if err := g.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: body}); err != nil {
				writeErr <- err
				return
			}
			acked <- i
		}
	}()
	select {
	case err := <-failed:
		t.Logf("the log failed as the disk filled: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the disk never filled")
	}
	termErr := make(chan error, 1)
	go func() { termErr <- g.SetUint64([]byte("CurrentTerm"), 9) }()
	select {
	case err := <-writeErr:
		t.Fatalf("a write failed while the node stops (raft would panic): %v", err)
	case err := <-termErr:
		t.Fatalf("a term was saved, or refused, after the failure: %v", err)
	case <-time.After(200 * time.Millisecond): // proves the writers wait: nothing to poll
	}
	select {
	case err := <-failed:
		t.Fatalf("OnFailure called twice: %v", err)
	default:
	}
	if err := l.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	// Not even closing releases them: raft would panic on the error. The
	// node exits instead (cmd/warren's stopOnStorageFailure).
	select {
	case err := <-writeErr:
		t.Fatalf("a waiting write returned after Close: %v", err)
	case err := <-termErr:
		t.Fatalf("a waiting term returned after Close: %v", err)
	case <-time.After(100 * time.Millisecond): // proves they stay: nothing to poll
	}
	var last uint64
	for len(acked) > 0 {
		last = <-acked
	}
	if last < 10 {
		t.Fatalf("only %d entries were written before the disk filled", last)
	}

	// Room again: every acknowledged entry is there, and writes go on.
	if out, err := exec.Command("mount", "-o", "remount,size=16m", dir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	l, err = Open(dir, Options{SegmentSize: 1 << 20})
	if err != nil {
		t.Fatalf("reopen after the disk filled: %v", err)
	}
	defer l.Close()
	g = groupT(t, l, "q")
	for i := uint64(1); i <= last; i++ {
		var got raft.Log
		if err := g.GetLog(i, &got); err != nil || !bytes.Equal(got.Data, body) {
			t.Fatalf("acknowledged entry %d of %d: %v", i, last, err)
		}
	}
	if err := g.StoreLog(&raft.Log{Index: last + 1, Term: 1, Type: raft.LogCommand, Data: body}); err != nil {
		t.Fatalf("write after reopening: %v", err)
	}
}
