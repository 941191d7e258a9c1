package wal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// FuzzReplay opens a log whose only segment holds arbitrary bytes: Open
// must cut off or refuse what it cannot read, never panic, and every entry
// it indexes must read back.
func FuzzReplay(f *testing.F) {
	var seed []byte
	seed = appendEntry(seed, "q", &raft.Log{Index: 1, Term: 1, Data: []byte("hello")})
	seed = appendSet(seed, "q", []byte("CurrentTerm"), []byte{0, 0, 0, 0, 0, 0, 0, 1})
	seed = appendEntry(seed, "q", &raft.Log{Index: 2, Term: 1, Extensions: []byte("x")})
	seed = appendDelete(seed, "q", 1, 1)
	seed = appendEntry(seed, "r", &raft.Log{Index: 5, Term: 2, Data: []byte("r")})
	seed = appendDrop(seed, "r")
	saltRecords(seed, salt(1)) // the segment the fuzzer writes is 1
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Add([]byte{5, 0, 0, 0, 1, 2, 3, 4, 1, 1, 'q'})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "00000001.wal"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, Options{})
		if err != nil {
			return
		}
		defer l.Close()
		for _, id := range l.Groups() {
			g, err := l.Group(id)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := g.FirstIndex()
			last, _ := g.LastIndex()
			for i := first; i <= last && i-first < 1000; i++ {
				var e raft.Log
				if err := g.GetLog(i, &e); err != nil && err != raft.ErrLogNotFound {
					t.Fatalf("entry %d of %q indexed but unreadable: %v", i, id, err)
				}
			}
		}
		checkAccounting(t, l)
		// The log takes writes after whatever replay cut off.
		g, _ := l.Group("after")
		if err := g.StoreLog(&raft.Log{Index: 1, Term: 1}); err != nil {
			t.Fatal(err)
		}
	})
}
