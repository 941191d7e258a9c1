package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Direct writes. Where the file system allows it, the committer writes
// the segment it appends to through a second descriptor opened with
// O_DIRECT|O_DSYNC: a commit goes from the committer's buffer to the
// disk and the write returns once it is durable, with no copy into the
// page cache, no writeback pass over dirty pages and no fdatasync after
// it. On this project's machines (ext4 on a virtio disk) a small commit
// cost a sixth less CPU and a fifth less time that way
// (docs/performance.md). Reads still go through the
// page cache, which the kernel keeps coherent with direct writes.
//
// A direct write covers whole blocks from an aligned buffer. A commit
// therefore rewrites the block the previous one ended in, starting with
// the bytes that block already holds (tail), and pads its last block with
// zeros after the zero header that ends the segment: replay reads them as
// nothing. The rewritten bytes are the same as on disk, so a write torn
// by a crash still leaves every earlier record whole.

// blockSize is the alignment of direct writes: the largest logical block
// size of the disks the log runs on.
const blockSize = 4096

func alignDown(n int64) int64 { return n &^ (blockSize - 1) }
func alignUp(n int64) int64   { return (n + blockSize - 1) &^ (blockSize - 1) }

// alignedBuf returns a zeroed buffer of n bytes whose address is a
// multiple of blockSize.
func alignedBuf(n int) []byte {
	b := make([]byte, n+blockSize)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (blockSize - 1))
	return b[skip : skip+n : skip+n]
}

// directWriter is the committer's state for direct writes.
type directWriter struct {
	// tail holds the bytes of the segment being written from its last
	// block boundary to its size: the start of the next write's block.
	tail  []byte
	buf   []byte // aligned scratch for a write
	zeros []byte // aligned zeros for prefill
}

// directSupported reports whether dir's file system takes direct writes
// of whole blocks: it writes one to a probe file, which it removes.
func directSupported(dir string) bool {
	path := filepath.Join(dir, "direct-probe")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_DIRECT|unix.O_DSYNC, 0o600)
	if err != nil {
		return false
	}
	defer os.Remove(path)
	defer f.Close()
	_, err = f.WriteAt(alignedBuf(blockSize), 0)
	return err == nil
}

// openDirect opens s's direct descriptor for writing, and loads the tail
// from the file: s is now the segment written to.
func (l *Log) openDirect(s *segment) error {
	f, err := os.OpenFile(l.segPath(s.id), os.O_RDWR|unix.O_DIRECT|unix.O_DSYNC, 0)
	if err != nil {
		return fmt.Errorf("open wal segment for direct writes: %w", err)
	}
	s.dio = f
	d := &l.direct
	if d.tail == nil {
		d.tail = make([]byte, 0, blockSize)
	}
	d.tail = d.tail[:s.size-alignDown(s.size)]
	if len(d.tail) > 0 {
		if _, err := s.f.ReadAt(d.tail, alignDown(s.size)); err != nil {
			return fmt.Errorf("read the last block of wal segment %08x: %w", s.id, err)
		}
	}
	return nil
}

// closeDirect closes s's direct descriptor, if it has one.
func (s *segment) closeDirect() error {
	if s.dio == nil {
		return nil
	}
	err := s.dio.Close()
	s.dio = nil
	return err
}

// writeDirect writes p, records of n bytes followed by the zero header,
// at start in s, through s's direct descriptor.
func (l *Log) writeDirect(s *segment, p []byte, n int, start int64) error {
	d := &l.direct
	off := alignDown(start)
	head := int(start - off)
	if head != len(d.tail) {
		return errors.New("wal: the block being written does not end where the last write did")
	}
	size := int(alignUp(int64(head + len(p))))
	if cap(d.buf) < size {
		d.buf = alignedBuf(max(size, 2*cap(d.buf)))
	}
	buf := d.buf[:size]
	copy(buf, d.tail)
	copy(buf[head:], p)
	clear(buf[head+len(p):])
	if _, err := s.dio.WriteAt(buf, off); err != nil {
		return err
	}
	s.filled = max(s.filled, off+int64(size))
	// Zeros after it, for the commits that follow: a write past the
	// file's end commits its size and blocks too. After the write, not
	// before, so a large record extends the file once rather than being
	// preceded by as much of zeros.
	if err := l.prefillDirect(s, off+int64(size)+1); err != nil {
		return err
	}
	end := start + int64(n)
	d.tail = append(d.tail[:0], buf[alignDown(end)-off:end-off]...)
	if cap(d.buf) > 4<<20 {
		d.buf = nil // a compaction's or a huge message's: let it go
	}
	return nil
}

// prefillDirect is prefill for direct writes: whole blocks of zeros from
// the block boundary at or after the file's end, past end (up to the
// segment's size, prefillSize at a time); the block the file ends in is
// written whole by the next write.
func (l *Log) prefillDirect(s *segment, end int64) error {
	d := &l.direct
	for {
		from := alignUp(s.filled)
		if from >= end {
			return nil
		}
		n := min(prefillSize, alignUp(max(l.segSize, end))-from)
		if d.zeros == nil {
			d.zeros = alignedBuf(prefillSize)
		}
		if _, err := s.dio.WriteAt(d.zeros[:n], from); err != nil {
			return fmt.Errorf("extend wal segment: %w", err)
		}
		s.filled = from + n
	}
}
