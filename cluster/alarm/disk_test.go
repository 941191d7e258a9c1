package alarm

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenmq/warren/raftq/testwait"
)

func diskAlarm(s *Set) bool { return slices.Contains(s.Local(), Disk) }

// TestDiskMonitorLimit moves the limit around the real free space of a
// directory's file system: above it the alarm is on, below it off, and a
// limit of zero never raises it.
func TestDiskMonitorLimit(t *testing.T) {
	s := NewSet("n1", nil)
	d := StartDiskMonitor(t.TempDir(), 0, s, nil)
	defer d.Close()
	free := d.Free()
	if free <= 0 {
		t.Fatalf("free space %d", free)
	}
	if diskAlarm(s) {
		t.Fatal("alarm with no limit")
	}
	d.SetLimit(free + 1<<40)
	if !diskAlarm(s) {
		t.Fatalf("no alarm with the limit (%d) above the free space (%d)", d.Limit(), d.Free())
	}
	if reason, _ := s.Blocking(); reason != "low on disk" {
		t.Fatalf("reason %q", reason)
	}
	d.SetLimit(free / 2)
	if diskAlarm(s) {
		t.Fatalf("alarm with the limit (%d) below the free space (%d)", d.Limit(), d.Free())
	}
}

// TestDiskMonitorFillingFileSystem fills a small file system of its own
// (a tmpfs, so it needs root) past the limit and empties it again: the
// monitor raises and clears the alarm by itself, on its own schedule.
func TestDiskMonitorFillingFileSystem(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=8m"); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skip("mounting a tmpfs needs root:", err)
		}
		t.Fatal(err)
	}
	defer unix.Unmount(dir, 0)

	s := NewSet("n1", nil)
	d := StartDiskMonitor(dir, 4<<20, s, nil)
	defer d.Close()
	if diskAlarm(s) {
		t.Fatalf("alarm on an empty 8 MiB file system (free %d)", d.Free())
	}
	fill := filepath.Join(dir, "fill")
	if err := os.WriteFile(fill, make([]byte, 6<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// 4 MiB above the limit at 250 MB/s: the next look is within 100 ms.
	testwait.For(t, 5*time.Second, "the alarm after filling", func() bool { return diskAlarm(s) })
	if f := d.Free(); f >= 4<<20 {
		t.Fatalf("free %d after filling", f)
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the alarm to clear after emptying", func() bool { return !diskAlarm(s) })
}

func TestDiskMonitorInterval(t *testing.T) {
	d := &DiskMonitor{}
	for _, c := range []struct {
		free, limit int64
		want        time.Duration
	}{
		{free: 100 << 30, limit: 50e6, want: maxDiskInterval}, // far: every 10 s
		{free: 60e6, limit: 50e6, want: minDiskInterval},      // 10 MB to go: every 100 ms
		{free: 550e6, limit: 50e6, want: 4 * time.Second},     // 500 MB to go, twice over at 250 MB/s
		{free: 40e6, limit: 50e6, want: alarmedDiskInterval},  // in alarm: every second
	} {
		d.free.Store(c.free)
		d.limit.Store(c.limit)
		if got := d.interval(); got != c.want {
			t.Errorf("free %d, limit %d: interval %v, want %v", c.free, c.limit, got, c.want)
		}
	}
}
