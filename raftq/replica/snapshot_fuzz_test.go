package replica

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
)

// snapshotWithBodies is a well-formed snapshot stream as a peer sends it:
// the head, then the live messages' entries.
func snapshotWithBodies(entries map[uint64][]byte) []byte {
	m := raftq.New(raftq.DefaultConfig(), 0)
	var live []uint64
	for i := uint64(1); i <= uint64(len(entries)); i++ {
		live = append(live, i)
	}
	b := appendSnapshotHead(nil, m.AppendSnapshot(nil), live)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, i := range live {
		b = binary.AppendUvarint(b, i)
		b = binary.AppendUvarint(b, 1)
		b = binary.AppendUvarint(b, uint64(len(entries[i])))
		b = append(b, entries[i]...)
	}
	return b
}

// FuzzRestoreSnapshot: a snapshot stream from a peer never panics the
// member, and what it claims (field lengths, counts) never allocates more
// than what it carries: a 2 GiB entry claimed in a few bytes fails fast.
func FuzzRestoreSnapshot(f *testing.F) {
	f.Add(snapshotWithBodies(nil))
	f.Add(snapshotWithBodies(map[uint64][]byte{1: []byte("one"), 2: []byte("two")}))
	// A head that claims a 16 GiB machine snapshot, then ends.
	f.Add(binary.AppendUvarint(append([]byte(nil), snapshotMagic...), 1<<34))
	// A valid head whose one entry claims 2 GiB of data and carries 3 bytes.
	hostile := snapshotWithBodies(nil)
	hostile = hostile[:len(hostile)-1] // drop the entry count
	hostile = binary.AppendUvarint(hostile, 1)
	hostile = binary.AppendUvarint(hostile, 1)
	hostile = binary.AppendUvarint(hostile, 1)
	hostile = binary.AppendUvarint(hostile, 1<<31)
	hostile = append(hostile, "abc"...)
	f.Add(hostile)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = restoreSnapshot(bytes.NewReader(b), raft.NewInmemStore())
	})
}

func TestRestoreSnapshotAllocatesByWhatArrives(t *testing.T) {
	b := binary.AppendUvarint(append([]byte(nil), snapshotMagic...), 1<<34)
	var before, after runtimeMem
	before.read()
	if _, err := restoreSnapshot(bytes.NewReader(b), raft.NewInmemStore()); err == nil {
		t.Fatal("a truncated snapshot restored")
	}
	after.read()
	if grew := after.total - before.total; grew > 8<<20 {
		t.Fatalf("a 16 GiB claim in %d bytes allocated %d bytes", len(b), grew)
	}
}

type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.total = s.TotalAlloc
}
