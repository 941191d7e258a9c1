package node

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A damaged log is set aside with every queue's directory, its groups are
// listed, and the list outlives a restart until each group is done: a
// node restarted midway does not open an emptied member as a voter.
func TestQuarantineListOutlivesRestarts(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, p := range []string{"wal/00000001.wal", "quorum/g1/snapshots/x", "quorum/g2/snapshots/y"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	qz, err := openQuarantine(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := qz.setAsideLog(dir, errors.New("damaged at offset 7")); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"wal", "quorum"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still in place after being set aside: %v", gone, err)
		}
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, quarantineDir, "*", "wal", "00000001.wal")); len(aside) != 1 {
		t.Errorf("the damaged segment is not kept for a post-mortem: %v", aside)
	}

	again, err := openQuarantine(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.ids(); !slices.Equal(got, []string{"g1", "g2"}) {
		t.Fatalf("after a restart, quarantined %v, want g1 and g2", got)
	}
	if err := again.done("g1"); err != nil {
		t.Fatal(err)
	}
	third, err := openQuarantine(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(third.ids(), []string{"g2"}) || third.holds("g1") || !third.holds("g2") {
		t.Fatalf("after g1 re-synced and a restart, quarantined %v, want g2 alone", third.ids())
	}
}
