package lazyfs

import (
	"math/rand/v2"
	"sync"

	"github.com/hanwen/go-fuse/v2/fs"
)

// FS is the state of a lazyfs mount: the writes held for each file and
// the crash epoch. Its methods are safe for concurrent use.
type FS struct {
	mu sync.Mutex
	// files maps a backing inode number to its held writes. An entry
	// goes when the backing file's last name does (its number may be
	// reused by a new file); handles open on it keep their own.
	files map[uint64]*file
	// epoch counts crashes; a handle opened in an earlier one is dead.
	epoch uint64
	// down: crashed and not restarted. Files are neither opened,
	// created, renamed, removed nor truncated: what the processes of
	// before the crash try after it must not land.
	down bool
}

func newFS() *FS { return &FS{files: make(map[uint64]*file)} }

// fileOf returns the state of backing inode ino, creating it; mu held.
func (f *FS) fileOf(ino uint64) *file {
	d := f.files[ino]
	if d == nil {
		d = &file{}
		f.files[ino] = d
	}
	return d
}

// sizeOf is the size of backing inode ino as seen through the mount,
// given the backing file's size; mu held.
func (f *FS) sizeOf(ino uint64, backing int64) int64 {
	if d := f.files[ino]; d != nil {
		return max(backing, d.end())
	}
	return backing
}

// forget drops the state of backing inode ino, whose last name is gone.
func (f *FS) forget(ino uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, ino)
}

// CrashReport says what a crash dropped.
type CrashReport struct {
	Files  int // files that lost writes
	Writes int // writes dropped whole or in part
}

// Crash is a power cut: every write not synced is dropped (r nil), or a
// random in-order prefix of each file's held writes is kept, the last
// possibly cut short (r non-nil: a torn write-back). Handles opened
// before it fail with EIO from then on, and the file system is down
// (every open and change of a name or size fails with EIO) until
// Restart.
func (f *FS) Crash(r *rand.Rand) CrashReport {
	f.mu.Lock()
	f.epoch++
	f.down = true
	var rep CrashReport
	var stale []*fs.Inode
	for _, d := range f.files {
		if len(d.writes) == 0 {
			continue
		}
		if lost := d.crash(r); lost > 0 {
			rep.Files++
			rep.Writes += lost
		}
		if d.inode != nil {
			stale = append(stale, d.inode)
		}
	}
	f.mu.Unlock()
	// Outside the lock: the kernel may wait for reads in flight, which
	// take it.
	for _, in := range stale {
		in.NotifyContent(0, 0)
	}
	return rep
}

// Restart brings the file system up after a crash: the machine has
// rebooted.
func (f *FS) Restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = false
}

// isDown tells whether the file system is down.
func (f *FS) isDown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

// Pending is the number of writes held, over all files.
func (f *FS) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.files {
		n += len(d.writes)
	}
	return n
}
