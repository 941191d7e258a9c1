// Command write-cost measures what one durable log write costs a Go process on this
// machine, made several ways, so that where that cost goes can be told apart. The process
// sleeps between writes (the write-ahead log's rhythm at 1,000 msg/s), writes 8 KiB with
// O_DIRECT into a file filled with zeros and synced beforehand, and counts its own CPU
// time (user and system) and each write's wall time. The modes:
//
//   - sleep: no write, the price of the sleep and wake-up alone;
//   - direct: a direct write without O_DSYNC (a data request, no cache flush);
//   - flush: fdatasync of another, unwritten file (on ext4, a cache flush only);
//   - dsync: a direct O_DSYNC write, what the write-ahead log does;
//   - dsync-raw: the same write made with syscall.RawSyscall6 (held-wal-writes.patch);
//   - fdatasync: a direct write, then fdatasync of the same file;
//   - flush-other: a direct write, then fdatasync of the other file.
//
// Run it on the file system of a data directory:
//
//	go run ./scripts/write-cost [--dir DIR] [--n N] [--every D] [--modes m1,m2,...]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const writeSize = 8 << 10

// knownModes are the ways a write is made, in the order of the package comment.
var knownModes = []string{"sleep", "direct", "flush", "dsync", "dsync-raw", "fdatasync", "flush-other"}

func main() {
	dir := flag.String("dir", os.TempDir(), "where to write (the file system of the data directory)")
	n := flag.Int("n", 1500, "writes per mode")
	every := flag.Duration("every", 2700*time.Microsecond, "sleep between writes (the leader's log wrote every 2.7 ms at 1,000 msg/s)")
	modes := flag.String("modes", strings.Join(knownModes, ","), "modes to measure, in order")
	flag.Parse()
	for _, m := range strings.Split(*modes, ",") {
		r, err := measure(*dir, m, *n, *every)
		if err != nil {
			fmt.Fprintln(os.Stderr, "write-cost:", err)
			os.Exit(1)
		}
		fmt.Println(r)
	}
}

type result struct {
	mode          string
	cpu, sysShare float64 // µs per write; system time's share of it
	p50, p99      time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("%-11s %6.1f µs CPU per write (%2.0f%% system), wall p50 %v, p99 %v",
		r.mode, r.cpu, 100*r.sysShare, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond))
}

// rusage is this process's user and system time so far.
func rusage() (user, sys time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

func aligned(n int) []byte {
	b := make([]byte, n+4096)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 4095)
	return b[skip : skip+n : skip+n]
}

func measure(dir, mode string, n int, every time.Duration) (result, error) {
	if !slices.Contains(knownModes, mode) {
		return result{}, fmt.Errorf("unknown mode %q (known: %s)", mode, strings.Join(knownModes, ", "))
	}
	tmp, err := os.MkdirTemp(dir, "write-cost-*")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "log")
	// Zeros written and synced first, as the write-ahead log fills a segment ahead of its
	// writes: the writes then change no block map and no size.
	if err := os.WriteFile(path, make([]byte, n*writeSize), 0o600); err != nil {
		return result{}, fmt.Errorf("fill the log file: %w", err)
	}
	other, err := os.Create(filepath.Join(tmp, "other"))
	if err != nil {
		return result{}, err
	}
	defer other.Close()
	if err := other.Sync(); err != nil {
		return result{}, err
	}
	flags := os.O_RDWR | unix.O_DIRECT
	if mode == "dsync" || mode == "dsync-raw" {
		flags |= unix.O_DSYNC
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return result{}, fmt.Errorf("open for direct writes: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return result{}, err
	}
	buf := aligned(writeSize)
	lat := make([]time.Duration, 0, n)
	u0, s0 := rusage()
	for i := range n {
		off := int64(i * writeSize)
		start := time.Now()
		var err error
		switch mode {
		case "direct", "dsync", "fdatasync", "flush-other":
			_, err = f.WriteAt(buf, off)
		case "dsync-raw":
			_, _, e := syscall.RawSyscall6(syscall.SYS_PWRITE64, f.Fd(),
				uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)), uintptr(off), 0, 0)
			if e != 0 {
				err = e
			}
		}
		switch {
		case err != nil:
		case mode == "fdatasync":
			err = unix.Fdatasync(int(f.Fd()))
		case mode == "flush" || mode == "flush-other":
			err = unix.Fdatasync(int(other.Fd()))
		}
		if err != nil {
			return result{}, fmt.Errorf("%s: write %d: %w", mode, i, err)
		}
		lat = append(lat, time.Since(start))
		time.Sleep(every)
	}
	u1, s1 := rusage()
	slices.Sort(lat)
	cpu := (u1 - u0) + (s1 - s0)
	return result{
		mode:     mode,
		cpu:      float64(cpu) / float64(time.Microsecond) / float64(n),
		sysShare: float64(s1-s0) / float64(cpu),
		p50:      lat[n/2],
		p99:      lat[n*99/100],
	}, nil
}
