package lazyfs_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenmq/warren/jepsen/lazyfs"
	"golang.org/x/sys/unix"
)

// mount serves a fresh backing directory through lazyfs for the test.
func mount(t *testing.T) (*lazyfs.Mounted, string) {
	t.Helper()
	if err := lazyfs.Supported(); err != nil {
		t.Skip(err)
	}
	backing, dir := t.TempDir(), t.TempDir()
	m, err := lazyfs.Mount(dir, backing)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return m, backing
}

func writeAt(t *testing.T, f *os.File, s string, off int64) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		t.Fatal(err)
	}
}

func contents(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSyncedWritesSurviveACrash(t *testing.T) {
	m, _ := mount(t)
	p := filepath.Join(m.Dir(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, f, "durable", 0)
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	writeAt(t, f, " and lost", 7)
	f.Close() // a close syncs nothing
	if got := contents(t, p); got != "durable and lost" {
		t.Fatalf("before the crash the file reads %q", got)
	}
	rep := m.Crash(nil)
	m.Restart()
	if rep.Files != 1 || rep.Writes != 1 {
		t.Errorf("crash report %+v, want one write of one file dropped", rep)
	}
	if got := contents(t, p); got != "durable" {
		t.Fatalf("after the crash the file reads %q, want only what was synced", got)
	}
}

func TestUnsyncedWritesAreLost(t *testing.T) {
	m, backing := mount(t)
	p := filepath.Join(m.Dir(), "f")
	if err := os.WriteFile(p, []byte("never synced"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, filepath.Join(backing, "f")); got != "" {
		t.Fatalf("the backing file holds %q before any sync", got)
	}
	m.Crash(nil)
	m.Restart()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err) // creation is metadata: durable at once
	}
	if fi.Size() != 0 {
		t.Fatalf("after the crash the file is %d bytes, want 0", fi.Size())
	}
}

func TestReadsMergeHeldWrites(t *testing.T) {
	m, _ := mount(t)
	p := filepath.Join(m.Dir(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writeAt(t, f, "aaaaaaaaaa", 0)
	f.Sync()
	writeAt(t, f, "bb", 2)
	writeAt(t, f, "ccc", 3)
	writeAt(t, f, "dd", 12) // past the end: a gap of zeros
	want := "aabcccaaaa\x00\x00dd"
	if got := contents(t, p); got != want {
		t.Fatalf("read %q, want %q", got, want)
	}
	if fi, _ := f.Stat(); fi.Size() != int64(len(want)) {
		t.Fatalf("size %d, want %d", fi.Size(), len(want))
	}
	buf := make([]byte, 4)
	if _, err := f.ReadAt(buf, 3); err != nil || string(buf) != "ccca" {
		t.Fatalf("read at 3: %q, %v", buf, err)
	}
}

func TestTruncateCutsHeldWrites(t *testing.T) {
	m, _ := mount(t)
	p := filepath.Join(m.Dir(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writeAt(t, f, "0123456789", 0)
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	if got := contents(t, p); got != "0123\x00\x00\x00\x00" {
		t.Fatalf("read %q after truncating to 4 and growing to 8", got)
	}
}

func TestHandlesFromBeforeACrashFail(t *testing.T) {
	m, _ := mount(t)
	f, err := os.Create(filepath.Join(m.Dir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m.Crash(nil)
	if _, err := os.OpenFile(filepath.Join(m.Dir(), "g"), os.O_CREATE|os.O_RDWR, 0o600); err == nil {
		t.Fatal("a file was created while the file system was down")
	}
	m.Restart()
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("a write through a handle opened before the crash succeeded")
	}
	if err := f.Sync(); err == nil {
		t.Fatal("a sync through a handle opened before the crash succeeded")
	}
	g, err := os.OpenFile(filepath.Join(m.Dir(), "f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open after a restart: %v", err)
	}
	g.Close()
}

func TestOSyncWritesAreDurable(t *testing.T) {
	m, _ := mount(t)
	p := filepath.Join(m.Dir(), "f")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|unix.O_DSYNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, f, "kept", 0)
	f.Close()
	m.Crash(nil)
	m.Restart()
	if got := contents(t, p); got != "kept" {
		t.Fatalf("an O_DSYNC write reads %q after a crash", got)
	}
}

func TestTornCrashKeepsAnInOrderPrefix(t *testing.T) {
	m, _ := mount(t)
	p := filepath.Join(m.Dir(), "f")
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 0))
	for round := range 20 {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		var all []byte
		for k := range 8 {
			w := bytes.Repeat([]byte{byte('a' + k)}, 1+r.IntN(100))
			writeAt(t, f, string(w), int64(len(all)))
			all = append(all, w...)
		}
		f.Close()
		m.Crash(r)
		m.Restart()
		got := []byte(contents(t, p))
		if !bytes.HasPrefix(all, got) {
			t.Fatalf("seed %d round %d: after a torn crash the file is not a prefix of what was written:\n%q\n%q",
				seed, round, got, all)
		}
	}
}

func TestRemountSeesOnlySyncedData(t *testing.T) {
	m, _ := mount(t)
	p := filepath.Join(m.Dir(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, f, "synced", 0)
	f.Sync()
	writeAt(t, f, "XXXXXX", 0)
	f.Close()
	if err := m.Remount(); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, p); got != "synced" {
		t.Fatalf("after a remount the file reads %q", got)
	}
}

func TestDirectIOIsRefused(t *testing.T) {
	m, _ := mount(t)
	_, err := os.OpenFile(filepath.Join(m.Dir(), "f"), os.O_CREATE|os.O_RDWR|unix.O_DIRECT, 0o600)
	if err == nil {
		t.Fatal("an O_DIRECT open succeeded")
	}
}

// TestStatAfterACrashWithADeadHandleOpen: the kernel may ask a file's
// attributes through any handle open on it, a dead one included.
func TestStatAfterACrashWithADeadHandleOpen(t *testing.T) {
	m, _ := mount(t)
	p := filepath.Join(m.Dir(), "f")
	dead, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	m.Crash(nil)
	m.Restart()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Stat(); err != nil {
		t.Fatalf("stat after a crash, with a handle from before it open: %v", err)
	}
}
