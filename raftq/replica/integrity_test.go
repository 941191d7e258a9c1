package replica

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/wal"
)

// damagedMember opens a one-member queue on a node's shared log, gives it
// 30 messages and a snapshot, closes it, lets damage change its files and
// opens it again, returning Open's error.
func damagedMember(t *testing.T, after int, damage func(t *testing.T, g *wal.Group, dir string, snapIndex uint64)) error {
	t.Helper()
	dir := t.TempDir()
	node := sharedLog.node(t)
	r := openTest(t, node, dir, nil)
	enqueue(t, r, 30)
	if err := r.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	list, err := r.storage.snaps.List()
	if err != nil || len(list) == 0 {
		t.Fatalf("snapshots: %v %v", list, err)
	}
	enqueue(t, r, after)
	r.Close()
	g, err := node.log.Group(Config{Dir: dir}.WALGroup())
	if err != nil {
		t.Fatal(err)
	}
	damage(t, g, dir, list[0].Index)
	node.restart(t)
	cfg := Config{Name: "test/q", Dir: dir, NodeID: "n1", Created: 1, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	node.configure(&cfg)
	r, err = Open(cfg)
	if err == nil {
		r.Close()
	}
	return err
}

// A snapshot whose live message's entry the log lost, with nothing after
// the snapshot that could have settled it: the member does not open.
func TestSnapshotMissingLiveEntryIsDamage(t *testing.T) {
	err := damagedMember(t, 0, func(t *testing.T, g *wal.Group, _ string, snap uint64) {
		if last, _ := g.LastIndex(); last != snap {
			t.Fatalf("the log reaches entry %d past the snapshot's %d: the check would rightly pass", last, snap)
		}
		first, _ := g.FirstIndex()
		for i := first; i <= snap; i++ {
			if m, ok := readEntryMessage(g, i); ok && string(m) == "m7" {
				if err := g.DeleteRange(i, i); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		t.Fatal("no entry holds message m7")
	})
	if !IsDamaged(err) {
		t.Fatalf("opened with a live message's entry gone: %v", err)
	}
}

// An entry missing after the snapshot: replay would need it.
func TestLogGapAfterSnapshotIsDamage(t *testing.T) {
	err := damagedMember(t, 10, func(t *testing.T, g *wal.Group, _ string, snap uint64) {
		last, _ := g.LastIndex()
		if last < snap+3 {
			t.Fatalf("log ends at %d, snapshot at %d: no entries after it to lose", last, snap)
		}
		if err := g.DeleteRange(snap+2, snap+2); err != nil {
			t.Fatal(err)
		}
	})
	if !IsDamaged(err) {
		t.Fatalf("opened with an entry after the snapshot gone: %v", err)
	}
}

// A latest snapshot that fails its checksum: raft would fall back to the
// older one, whose later entries compaction may have removed.
func TestDamagedSnapshotIsDamage(t *testing.T) {
	err := damagedMember(t, 0, func(t *testing.T, _ *wal.Group, dir string, _ uint64) {
		states, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
		if len(states) == 0 {
			t.Fatal("no snapshot state file")
		}
		b, err := os.ReadFile(states[len(states)-1])
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x40
		if err := os.WriteFile(states[len(states)-1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if !IsDamaged(err) {
		t.Fatalf("opened with its latest snapshot damaged: %v", err)
	}
}

// The same steps with no damage open: the checks pass on a sound member.
func TestSoundMemberOpens(t *testing.T) {
	if err := damagedMember(t, 10, func(*testing.T, *wal.Group, string, uint64) {}); err != nil {
		t.Fatalf("a sound member did not open: %v", err)
	}
	if err := damagedMember(t, 0, func(*testing.T, *wal.Group, string, uint64) {}); err != nil {
		t.Fatalf("a sound member did not open: %v", err)
	}
}

// readEntryMessage is the body of entry i if it is an enqueue.
func readEntryMessage(g *wal.Group, i uint64) ([]byte, bool) {
	var l raft.Log
	if g.GetLog(i, &l) != nil {
		return nil, false
	}
	m, err := decodeEntryMessage(l.Data)
	if err != nil || m == nil {
		return nil, false
	}
	return m.Body, true
}
