package wal

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// TestCommitDirtiesOnlyItsPages: a commit of one small entry makes the
// kernel write back a page or two, not the page-cache folio a large
// write of zeros ahead of it created (1 MiB per commit before the zeros
// went in pages).
func TestCommitDirtiesOnlyItsPages(t *testing.T) {
	l := openT(t, t.TempDir(), 8<<20)
	defer l.Close()
	g := groupT(t, l, "q")
	data := strings.Repeat("x", 1000)
	put := func(i uint64) {
		t.Helper()
		if err := g.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(data)}}); err != nil {
			t.Fatal(err)
		}
	}
	put(1) // fills the first 1 MiB with zeros
	const commits = 200
	before := writeBytes(t)
	for i := uint64(2); i < 2+commits; i++ {
		put(i)
	}
	written := writeBytes(t) - before
	if written == 0 {
		t.Skip("the file system accounts no writes to the storage layer (tmpfs?)")
	}
	if per := written / commits; per > 16<<10 {
		t.Fatalf("%d bytes sent to storage per commit of a 1 KB entry, want at most a few pages", per)
	}
	t.Logf("%d bytes per commit", written/commits)
}

// writeBytes is the bytes this process has caused to be sent to the
// storage layer (/proc/self/io: counted as page-cache pages are dirtied).
func writeBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "write_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no write_bytes in /proc/self/io")
	return 0
}
