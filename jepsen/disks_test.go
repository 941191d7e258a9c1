package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/jepsen/lazyfs"
)

// TestLoseUnsyncedDropsWhatANodeDidNotSync: on the disks the harness
// mounts, a file a node synced survives the fault and one it did not
// comes back empty.
func TestLoseUnsyncedDropsWhatANodeDidNotSync(t *testing.T) {
	if err := lazyfs.Supported(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	d, err := mountDisks(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	c := fakeCluster(1)
	c.log, c.disks = slog.New(slog.NewTextHandler(io.Discard, nil)), d
	data := filepath.Join(dir, "warren-0", "data")
	synced, err := os.Create(filepath.Join(data, "synced"))
	if err != nil {
		t.Fatal(err)
	}
	synced.WriteString("kept")
	synced.Sync()
	synced.Close()
	if err := os.WriteFile(filepath.Join(data, "unsynced"), []byte("lost"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.loseUnsynced(0, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(data, "synced")); err != nil || string(b) != "kept" {
		t.Errorf("the synced file reads %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(data, "unsynced")); err != nil || len(b) != 0 {
		t.Errorf("the unsynced file reads %q, %v; want it empty", b, err)
	}
}

func TestLoseUnsyncedNeedsTheDisks(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err := newNemesis(log, fakeCluster(3), &workload{}, "", 1, time.Second, []string{"lose-unsynced"}, nil)
	if err == nil || !strings.Contains(err.Error(), "lazyfs") {
		t.Fatalf("lose-unsynced without lazyfs disks: %v", err)
	}
}
