package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFillDiskLeavesNoSpace: on a small tmpfs (as root), the filler takes
// every byte, the next write fails with ENOSPC, and removing it gives the
// space back.
func TestFillDiskLeavesNoSpace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "jepsen-test", dir).CombinedOutput(); err != nil {
		t.Skipf("mount a tmpfs: %v: %s", err, out)
	}
	defer exec.Command("umount", dir).Run()
	if !onSmallDisk(dir) {
		t.Fatal("the tmpfs is not recognised")
	}
	filler := filepath.Join(dir, fillerName)
	wrote, err := fillDisk(filler)
	if err != nil {
		t.Fatal(err)
	}
	if wrote < 3<<20 {
		t.Errorf("wrote %d bytes to a 4 MiB disk", wrote)
	}
	err = os.WriteFile(filepath.Join(dir, "after"), make([]byte, 4096), 0o644)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write to the full disk: %v, want ENOSPC", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "after"), make([]byte, 4096), 0o644); err != nil {
		t.Fatalf("a write once the filler is gone: %v", err)
	}
}

// TestPanicLine: a Go panic or fatal runtime error in a node's log is
// found; an error that merely mentions the words is not.
func TestPanicLine(t *testing.T) {
	for text, want := range map[string]string{
		"level=ERROR msg=\"write-ahead log failed\" err=\"no space left on device\"\n":          "",
		"level=INFO msg=\"raft: no panic here\"\n":                                              "",
		"time=x level=INFO msg=ok\npanic: raft: failed to persist vote\n\ngoroutine 7 [run]:\n": "panic: raft: failed to persist vote",
		"fatal error: concurrent map writes\n":                                                  "fatal error: concurrent map writes",
	} {
		if got := panicLine(text); got != want {
			t.Errorf("panicLine(%q) = %q, want %q", text, got, want)
		}
	}
	stop := `time=x level=ERROR msg="storage failed: stopping the node" err="wal write: no space left on device"`
	if got := storageFailure("a\n" + stop + "\nb\n"); got != stop {
		t.Errorf("storageFailure = %q", got)
	}
	if got := storageFailure("level=ERROR msg=\"raft: failed to append to logs\"\n"); got != "" {
		t.Errorf("storageFailure of a log without the stop = %q", got)
	}
	if got := lastLine("a\nb\n\n"); got != "b" {
		t.Errorf("lastLine = %q", got)
	}
}
