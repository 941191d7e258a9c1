package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openT(t *testing.T, dir string, segSize int64) *Log {
	t.Helper()
	l, err := Open(dir, Options{SegmentSize: segSize})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func groupT(t *testing.T, l *Log, id string) *Group {
	t.Helper()
	g, err := l.Group(id)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func entry(i uint64, data string) *raft.Log {
	return &raft.Log{Index: i, Term: i/10 + 1, Type: raft.LogCommand, Data: []byte(data),
		AppendedAt: time.Unix(0, int64(i)*1000)}
}

func store(t *testing.T, g *Group, from, to uint64) {
	t.Helper()
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, entry(i, fmt.Sprintf("%s-%d", g.g.id, i)))
	}
	if err := g.StoreLogs(logs); err != nil {
		t.Fatalf("store %d-%d: %v", from, to, err)
	}
}

func wantEntry(t *testing.T, g *Group, i uint64) {
	t.Helper()
	var got raft.Log
	if err := g.GetLog(i, &got); err != nil {
		t.Fatalf("get %d: %v", i, err)
	}
	want := entry(i, fmt.Sprintf("%s-%d", g.g.id, i))
	if got.Index != i || got.Term != want.Term || got.Type != want.Type ||
		!bytes.Equal(got.Data, want.Data) || !got.AppendedAt.Equal(want.AppendedAt) {
		t.Fatalf("entry %d = %+v, want %+v", i, got, want)
	}
}

func wantMissing(t *testing.T, g *Group, i uint64) {
	t.Helper()
	var got raft.Log
	if err := g.GetLog(i, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("get %d: err %v, want ErrLogNotFound", i, err)
	}
}

func wantBounds(t *testing.T, g *Group, first, last uint64) {
	t.Helper()
	f, _ := g.FirstIndex()
	l, _ := g.LastIndex()
	if f != first || l != last {
		t.Fatalf("bounds %d-%d, want %d-%d", f, l, first, last)
	}
}

func TestStoreDeleteReopen(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, 0)
	a, b := groupT(t, l, "a"), groupT(t, l, "b")
	store(t, a, 1, 100)
	store(t, b, 1, 10)
	if err := a.DeleteRange(1, 40); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteRange(50, 59); err != nil { // a hole: the log is sparse
		t.Fatal(err)
	}
	if err := a.DeleteRange(96, 100); err != nil { // a cut tail, then rewritten
		t.Fatal(err)
	}
	store(t, a, 96, 120)
	if err := a.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		a, b := groupT(t, l, "a"), groupT(t, l, "b")
		wantBounds(t, a, 41, 120)
		wantBounds(t, b, 1, 10)
		for i := uint64(1); i <= 120; i++ {
			if i <= 40 || (i >= 50 && i <= 59) {
				wantMissing(t, a, i)
			} else {
				wantEntry(t, a, i)
			}
		}
		wantEntry(t, b, 10)
		if v, err := a.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
			t.Fatalf("CurrentTerm = %d, %v", v, err)
		}
		if _, err := b.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
			t.Fatalf("missing key: %v, want raft's \"not found\"", err)
		}
		if got := l.Groups(); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("groups %v", got)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, 0)
	defer l.Close()
	check(l)
}

func TestDropGroup(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, 0)
	a, b := groupT(t, l, "a"), groupT(t, l, "b")
	store(t, a, 1, 5)
	store(t, b, 1, 5)
	if err := a.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := l.DropGroup("a"); err != nil {
		t.Fatal(err)
	}
	if err := a.StoreLog(entry(6, "x")); !errors.Is(err, ErrNoGroup) {
		t.Fatalf("store to a dropped group: %v", err)
	}
	if err := l.DropGroup("nope"); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openT(t, dir, 0)
	defer l.Close()
	if got := l.Groups(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("groups after reopen %v", got)
	}
	a = groupT(t, l, "a") // the same name again: a new, empty group
	wantBounds(t, a, 0, 0)
	if _, err := a.Get([]byte("k")); err == nil {
		t.Fatal("a re-created group kept its stable value")
	}
}

// A crash during a write leaves a torn record at the end: reopening cuts
// it off and keeps everything before it.
func TestTornTail(t *testing.T) {
	for _, cut := range []int{1, 5, headerSize + 3} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, dir, 0)
			g := groupT(t, l, "q")
			store(t, g, 1, 10)
			store(t, g, 11, 11)
			l.Close()
			// The file is longer than its records (zeros, prefill): cut
			// into the last record itself.
			var end int64
			for i := uint64(1); i <= 11; i++ {
				end += int64(len(appendEntry(nil, "q", entry(i, fmt.Sprintf("q-%d", i)))))
			}
			last := int64(len(appendEntry(nil, "q", entry(11, "q-11"))))
			path := filepath.Join(dir, "00000001.wal")
			if err := os.Truncate(path, end-last+int64(cut)); err != nil {
				t.Fatal(err)
			}
			l = openT(t, dir, 0)
			g = groupT(t, l, "q")
			wantBounds(t, g, 1, 10)
			store(t, g, 11, 12) // writes go on after the last good record
			l.Close()
			l = openT(t, dir, 0)
			defer l.Close()
			g = groupT(t, l, "q")
			wantBounds(t, g, 1, 12)
			wantEntry(t, g, 11)
		})
	}
}

func TestCorruptMiddleSegmentIsAnError(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, 512)
	g := groupT(t, l, "q")
	for i := uint64(1); i <= 40; i++ {
		store(t, g, i, i)
	}
	l.Close()
	path := filepath.Join(dir, "00000001.wal")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[headerSize+2] ^= 0xff // in the first record's payload
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, Options{SegmentSize: 512})
	if err == nil {
		l.Close()
		t.Fatal("opened a log with a damaged segment that is not the last")
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damage in a segment that is not the last: %v, want ErrCorrupt", err)
	}
}

// One message left unacked while the queue moves on: its entry stays, the
// segments around it go, and disk use stays bounded.
func TestCompactionKeepsOldLiveEntry(t *testing.T) {
	dir := t.TempDir()
	const segSize = 4096
	l := openT(t, dir, segSize)
	g := groupT(t, l, "q")
	if err := g.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	store(t, g, 1, 1) // the old live message
	next := uint64(2)
	for round := 0; round < 200; round++ {
		store(t, g, next, next+4)
		next += 5
		// Compaction as raft does it with a sparse log: everything but
		// entry 1 and the last few goes.
		if next > 20 {
			if err := g.DeleteRange(2, next-10); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("segments %d, oldest %08x", l.Segments(), l.segs[0].id)
	if n := l.Segments(); n > 4 {
		t.Fatalf("%d segments of %d bytes for a handful of live entries", n, segSize)
	}
	check := func(l *Log) {
		g := groupT(t, l, "q")
		wantEntry(t, g, 1)
		for i := next - 9; i < next; i++ {
			wantEntry(t, g, i)
		}
		wantMissing(t, g, 2)
		wantMissing(t, g, next-10)
		if v, err := g.GetUint64([]byte("CurrentTerm")); err != nil || v != 3 {
			t.Fatalf("CurrentTerm after compaction = %d, %v", v, err)
		}
		checkAccounting(t, l)
	}
	check(l)
	l.Close()
	l = openT(t, dir, segSize)
	defer l.Close()
	check(l)
}

type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkAccounting verifies each segment's live bytes and stable count
// against the index.
func checkAccounting(t fataler, l *Log) {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	live := map[uint32]int64{}
	stable := map[uint32]int{}
	for _, g := range l.groups {
		for _, r := range g.runs {
			if len(r.locs) == 0 {
				t.Fatalf("group %s has an empty run", g.id)
			}
			for _, at := range r.locs {
				live[at.seg] += int64(at.n)
			}
		}
		for k := 1; k < len(g.runs); k++ {
			if g.runs[k].first <= g.runs[k-1].last()+1 {
				t.Fatalf("group %s: runs %d and %d touch or overlap", g.id, k-1, k)
			}
		}
		for _, v := range g.stable {
			stable[v.seg]++
		}
	}
	for _, s := range l.segs {
		if s.live != live[s.id] || s.stable != stable[s.id] {
			t.Fatalf("segment %d: live %d stable %d, index says %d and %d",
				s.id, s.live, s.stable, live[s.id], stable[s.id])
		}
	}
	for seg := range live {
		if seg < l.segs[0].id {
			t.Fatalf("the index points into removed segment %d", seg)
		}
	}
}

// Writers of many groups at once share commits.
func TestGroupCommit(t *testing.T) {
	l := openT(t, t.TempDir(), 0)
	defer l.Close()
	const groups, writes = 20, 50
	var wg sync.WaitGroup
	for k := 0; k < groups; k++ {
		g := groupT(t, l, fmt.Sprint("g", k))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(1); i <= writes; i++ {
				if err := g.StoreLog(entry(i, "x")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if c := l.Commits(); c >= groups*writes {
		t.Fatalf("%d commits for %d writes: no sharing", c, groups*writes)
	}
	t.Logf("%d writes in %d commits", groups*writes, l.Commits())
}

func TestClosedLogRefusesWrites(t *testing.T) {
	l := openT(t, t.TempDir(), 0)
	g := groupT(t, l, "q")
	l.Close()
	if err := g.StoreLog(entry(1, "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("store after close: %v", err)
	}
}

// A crash in the middle of a write into the zero-filled tail leaves part
// of a record before the zeros: it is cut, and later writes replace it.
func TestTornRecordInFilledTail(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, 0)
	g := groupT(t, l, "q")
	store(t, g, 1, 5)
	l.Close()
	var end int64
	for i := uint64(1); i <= 5; i++ {
		end += int64(len(appendEntry(nil, "q", entry(i, fmt.Sprintf("q-%d", i)))))
	}
	torn := appendEntry(nil, "q", entry(6, "q-6"))
	f, err := os.OpenFile(filepath.Join(dir, "00000001.wal"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(torn[:len(torn)-3], end); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l = openT(t, dir, 0)
	g = groupT(t, l, "q")
	wantBounds(t, g, 1, 5)
	store(t, g, 6, 6)
	l.Close()
	l = openT(t, dir, 0)
	defer l.Close()
	wantEntry(t, groupT(t, l, "q"), 6)
}

// A recycled segment file holds whole records of its earlier use past the
// current one's last record. If a crash loses the zero header that ends
// the segment, one of them can sit exactly where replay looks next: its
// checksum, salted with the earlier segment's ID, must end replay there.
func TestRecycledSegmentsEarlierRecordsAreNotReplayed(t *testing.T) {
	for _, earlier := range []uint32{1, 2} {
		t.Run(fmt.Sprint(earlier), func(t *testing.T) {
			dir := t.TempDir()
			cur := appendEntry(nil, "q", entry(7, "q-7"))
			saltRecords(cur, salt(2))
			old := appendEntry(nil, "q", entry(8, "q-8"))
			saltRecords(old, salt(earlier))
			if err := os.WriteFile(filepath.Join(dir, "00000002.wal"), append(cur, old...), 0o600); err != nil {
				t.Fatal(err)
			}
			l := openT(t, dir, 0)
			defer l.Close()
			g := groupT(t, l, "q")
			if earlier == 2 {
				// The control: salted for this segment, it is a record.
				wantBounds(t, g, 7, 8)
				return
			}
			wantBounds(t, g, 7, 7)
			wantEntry(t, g, 7)
		})
	}
}

// Spent segments' files come back as later segments, and what they held
// before never shows through, across reopenings.
func TestSegmentFilesAreRecycled(t *testing.T) {
	dir := t.TempDir()
	const segSize = 2048
	l := openT(t, dir, segSize)
	g := groupT(t, l, "q")
	first, err := os.Stat(filepath.Join(dir, "00000001.wal"))
	if err != nil {
		t.Fatal(err)
	}
	reused := false
	next := uint64(1)
	for round := 0; round < 60; round++ {
		store(t, g, next, next+3)
		next += 4
		if err := g.DeleteRange(1, next-3); err != nil { // keep the last two
			t.Fatal(err)
		}
		if round%20 == 19 {
			l.Close()
			l = openT(t, dir, segSize)
			g = groupT(t, l, "q")
		}
		wantBounds(t, g, next-2, next-1)
		wantEntry(t, g, next-2)
		wantEntry(t, g, next-1)
		names, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(names) > 3+maxSpares {
			t.Fatalf("round %d: %d files: %v", round, len(names), names)
		}
		for _, name := range names {
			if fi, err := os.Stat(name); err == nil && filepath.Base(name) > "00000001.wal" && strings.HasSuffix(name, ".wal") && os.SameFile(fi, first) {
				reused = true
			}
		}
	}
	l.Close()
	if !reused {
		t.Fatal("segment 1's file never came back as a later segment")
	}
	checkReopen := openT(t, dir, segSize)
	defer checkReopen.Close()
	wantBounds(t, groupT(t, checkReopen, "q"), next-2, next-1)
}

// Where the file system takes direct writes the log makes them, unless
// told to write buffered; records of every size (one larger than a
// segment and than prefillSize), across block boundaries and segments,
// read back the same after reopening either way.
func TestDirectWrites(t *testing.T) {
	dir := t.TempDir()
	if !directSupported(dir) {
		t.Skip("the file system takes no direct writes (tmpfs?)")
	}
	for _, buffered := range []bool{false, true, false} {
		l, err := Open(dir, Options{SegmentSize: 64 << 10, Buffered: buffered})
		if err != nil {
			t.Fatal(err)
		}
		if l.Direct() == buffered {
			t.Fatalf("buffered %v: Direct() = %v", buffered, l.Direct())
		}
		g := groupT(t, l, "q")
		first, _ := g.LastIndex()
		for i := first + 1; i <= first+300; i++ {
			data := strings.Repeat(string(rune('a'+i%26)), bodySize(i))
			if err := g.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(data)}); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
	}
	l := openT(t, dir, 64<<10)
	defer l.Close()
	g := groupT(t, l, "q")
	wantBounds(t, g, 1, 900)
	for i := uint64(1); i <= 900; i++ {
		var got raft.Log
		if err := g.GetLog(i, &got); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if want := strings.Repeat(string(rune('a'+i%26)), bodySize(i)); string(got.Data) != want {
			t.Fatalf("entry %d: %d bytes, want %d", i, len(got.Data), len(want))
		}
	}
	if l.Segments() < 2 {
		t.Fatalf("%d segments, want several", l.Segments())
	}
}

// bodySize is TestDirectWrites's entry size for index i: up to 5,000
// bytes, and 3 MiB for every hundred and fiftieth.
func bodySize(i uint64) int {
	if i%150 == 0 {
		return 3 << 20
	}
	return int(i * 37 % 5000)
}

// Damage in the last segment followed by intact records is not a torn
// tail: bytes that were synced have changed. Replay refuses the log
// rather than cut away what was acknowledged.
func TestCorruptionBeforeIntactRecordsIsNotATornTail(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, 0)
	g := groupT(t, l, "q")
	if err := g.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	store(t, g, 1, 20)
	l.Close()
	path := filepath.Join(dir, "00000001.wal")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Damage the payload of entry 5's record: records 6 to 20 after it
	// are intact. Find it by its data.
	off := int64(bytes.Index(b, []byte("q-5"))) - headerSize - 8
	b[off+headerSize+3] ^= 0x55
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("opened a log whose synced records changed: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Size() != int64(len(b)) {
		t.Fatalf("the refused log was truncated to %d bytes", fi.Size())
	}
}
