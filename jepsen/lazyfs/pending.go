package lazyfs

import (
	"math/rand/v2"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
)

// write is one write held until its file is synced.
type write struct {
	off  int64
	data []byte
}

func (w write) end() int64 { return w.off + int64(len(w.data)) }

// file is the state of one backing inode: the writes it holds. The FS's
// lock guards it.
type file struct {
	writes []write
	// fd is a descriptor of the backing file, writable, held while there
	// are writes: a sync or a crash writes them through it even after
	// every handle that made them is closed.
	fd int
	// inode is the kernel's inode for the file, told to drop its cached
	// pages when a crash changes what the file holds.
	inode *fs.Inode
}

// hold appends a write, taking a descriptor of the backing file (a
// duplicate of fd) if the file held none.
func (f *file) hold(fd int, off int64, data []byte) syscall.Errno {
	if len(f.writes) == 0 {
		d, err := syscall.Dup(fd)
		if err != nil {
			return errno(err)
		}
		f.fd = d
	}
	f.writes = append(f.writes, write{off: off, data: append([]byte(nil), data...)})
	return 0
}

// end is the end of the last byte written, 0 if none is held.
func (f *file) end() int64 {
	var e int64
	for _, w := range f.writes {
		e = max(e, w.end())
	}
	return e
}

// overlay lays the held writes over buf, which holds the file's bytes
// from off.
func (f *file) overlay(buf []byte, off int64) {
	for _, w := range f.writes {
		lo, hi := max(off, w.off), min(off+int64(len(buf)), w.end())
		if lo < hi {
			copy(buf[lo-off:hi-off], w.data[lo-w.off:hi-w.off])
		}
	}
}

// sync writes the held writes to the backing file, in order, and holds
// none after.
func (f *file) sync() syscall.Errno {
	return f.persist(len(f.writes), -1)
}

// persist writes the first n held writes to the backing file, and cut
// bytes of the next if cut >= 0, and drops the rest.
func (f *file) persist(n, cut int) syscall.Errno {
	if len(f.writes) == 0 {
		return 0
	}
	var first error
	for k, w := range f.writes {
		data := w.data
		if k == n && cut >= 0 {
			data = data[:min(cut, len(data))]
		} else if k >= n {
			break
		}
		if _, err := syscall.Pwrite(f.fd, data, w.off); err != nil && first == nil {
			first = err
		}
	}
	syscall.Close(f.fd)
	f.writes, f.fd = nil, 0
	return errno(first)
}

// truncate cuts the held writes at size: what a truncate removes, an
// earlier write held must not bring back.
func (f *file) truncate(size int64) {
	had := len(f.writes) > 0
	kept := f.writes[:0]
	for _, w := range f.writes {
		if w.off >= size {
			continue
		}
		if w.end() > size {
			w.data = w.data[:size-w.off]
		}
		kept = append(kept, w)
	}
	f.writes = kept
	if had && len(kept) == 0 {
		syscall.Close(f.fd)
		f.writes, f.fd = nil, 0
	}
}

// crash keeps a random in-order prefix of the held writes (r non-nil),
// the last possibly cut short, or none, and drops the rest. It reports
// the writes dropped whole or in part.
func (f *file) crash(r *rand.Rand) int {
	n, cut := 0, -1
	if r != nil {
		n = r.IntN(len(f.writes) + 1)
		if n < len(f.writes) && r.IntN(2) == 0 {
			cut = r.IntN(len(f.writes[n].data) + 1)
		}
	}
	lost := len(f.writes) - n
	f.persist(n, cut)
	return lost
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return fs.ToErrno(err)
}
