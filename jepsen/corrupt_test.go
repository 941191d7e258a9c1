package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fakeDataDir makes a node directory with two segments (records, then
// zeros), a snapshot and a metadata file, and returns it with the files'
// first contents.
func fakeDataDir(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{
		"data/wal/00000001.wal":                             append(bytes.Repeat([]byte("record-1 "), 200), make([]byte, 4096)...),
		"data/wal/00000002.wal":                             append(bytes.Repeat([]byte("record-2 "), 100), make([]byte, 4096)...),
		"data/quorum/q1/snapshots/2-40-17/state.bin":        bytes.Repeat([]byte("state "), 300),
		"data/quorum/q1/snapshots/2-40-17/meta.json":        []byte(`{"Index":40}`),
		"data/meta/raft.db":                                 bytes.Repeat([]byte("bolt "), 300),
		"data/quarantine/20261207T000000Z/wal/00000001.wal": bytes.Repeat([]byte("aside "), 300),
		"data/wal/spare-00000000":                           bytes.Repeat([]byte("spare "), 300),
	}
	for rel, b := range files {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, files
}

// The corrupt fault damages only segments and snapshot states, within
// their written part, and the same seed damages the same bytes again.
func TestCorruptDamagesOnlyQueueStorage(t *testing.T) {
	damagedAny := map[string]bool{}
	for seed := uint64(1); seed <= 30; seed++ {
		dir, files := fakeDataDir(t)
		done, err := damageFiles(seeded(seed), dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(done) < 1 || len(done) > 3 {
			t.Fatalf("seed %d: %d damages, want one to three: %v", seed, len(done), done)
		}
		changed := 0
		for rel, was := range files {
			now, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(now, was) {
				continue
			}
			changed++
			damagedAny[rel] = true
			if !slices.Contains([]string{"data/wal/00000001.wal", "data/wal/00000002.wal", "data/quorum/q1/snapshots/2-40-17/state.bin"}, rel) {
				t.Errorf("seed %d damaged %s", seed, rel)
			}
			written := len(bytes.TrimRight(was, "\x00"))
			if len(now) == len(was) && !bytes.Equal(now[written:], was[written:]) {
				t.Errorf("seed %d flipped bytes of %s past its written part", seed, rel)
			}
			if len(now) < len(was) && len(now) < written/2 {
				t.Errorf("seed %d cut %s to %d bytes, below half its written %d", seed, rel, len(now), written)
			}
		}
		if changed == 0 {
			t.Errorf("seed %d: %v, and no file changed", seed, done)
		}
		again, _ := fakeDataDir(t)
		if redo, _ := damageFiles(seeded(seed), again); !slices.Equal(redo, done) {
			t.Errorf("seed %d damaged differently the second time: %v, then %v", seed, done, redo)
		}
	}
	if len(damagedAny) != 3 {
		t.Errorf("over 30 seeds only %v were damaged", damagedAny)
	}
}
