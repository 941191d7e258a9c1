package lazyfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// handle is an open file: a backing descriptor and the file's state.
type handle struct {
	fs    *FS
	file  *file
	ino   uint64 // the backing inode
	fd    int    // the backing descriptor, read-write
	sync  bool   // opened O_SYNC or O_DSYNC: each write syncs the file
	epoch uint64 // the crash epoch it was opened in
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

// alive tells whether the handle outlived no crash; fs.mu held.
func (h *handle) alive() bool { return h.epoch == h.fs.epoch }

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if !h.alive() {
		return nil, syscall.EIO
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(h.fd, &st); err != nil {
		return nil, errno(err)
	}
	size := max(st.Size, h.file.end())
	if off >= size {
		return fuse.ReadResultData(nil), 0
	}
	buf := dest[:min(int64(len(dest)), size-off)]
	n, err := syscall.Pread(h.fd, buf, off)
	if err != nil {
		return nil, errno(err)
	}
	clear(buf[n:]) // past the backing file's end, before a held write's
	h.file.overlay(buf, off)
	return fuse.ReadResultData(buf), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if !h.alive() {
		return 0, syscall.EIO
	}
	if e := h.file.hold(h.fd, off, data); e != 0 {
		return 0, e
	}
	if h.sync {
		if e := h.file.sync(); e != 0 {
			return 0, e
		}
	}
	return uint32(len(data)), 0
}

// Fsync serves fsync and fdatasync alike: metadata is durable anyway.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if !h.alive() {
		return syscall.EIO
	}
	return h.file.sync()
}

// Flush is a close: it syncs nothing.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if !h.alive() {
		return syscall.EIO
	}
	return 0
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	return errno(syscall.Close(h.fd))
}

// Getattr answers even for a handle from before a crash: the kernel may
// ask the inode's attributes through any handle open on it, and one that
// a dead process closed may not be released yet.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Fstat(h.fd, &st); err != nil {
		return errno(err)
	}
	st.Size = max(st.Size, h.file.end())
	out.FromStat(&st)
	return 0
}

// Allocate is metadata: durable at once.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if !h.alive() {
		return syscall.EIO
	}
	if mode&^unix.FALLOC_FL_KEEP_SIZE != 0 {
		// Punching holes or zeroing ranges would have to cut held
		// writes too; nothing served here needs them.
		return syscall.EOPNOTSUPP
	}
	return errno(unix.Fallocate(h.fd, mode, int64(off), int64(size)))
}

// truncate sets the file's size, backing and held: durable at once.
func (h *handle) truncate(size int64) syscall.Errno {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if !h.alive() {
		return syscall.EIO
	}
	if err := syscall.Ftruncate(h.fd, size); err != nil {
		return errno(err)
	}
	h.file.truncate(size)
	return 0
}
