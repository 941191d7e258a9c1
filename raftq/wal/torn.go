package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// A crash can leave the last segment's last write half on disk: replay
// finds a damaged record with nothing intact after it, and cutting it off
// loses only what was never reported durable (a write is acknowledged
// after its sync). A damaged record followed by intact ones is another
// thing: bytes that were synced have changed (a bad disk, a stray write),
// and cutting there would silently drop entries, terms and votes this
// member promised to keep. Replay refuses such a log (ErrCorrupt): the
// member must not come back as if nothing happened.
//
// The line is drawn by what follows the damage, not by what was synced,
// which the log does not record: a power cut that persisted the pages of
// the last, unsynced write out of order can also leave a damaged record
// with intact ones after it, and that node then refuses to start though
// nothing it acknowledged was lost. Recovering it is the same as from
// real corruption (its data moved aside, it rejoins and re-syncs); the
// other outcome, cutting synced entries silently, is the one to avoid.

// ErrCorrupt is replay's answer for a log whose damage is not a torn tail.
var ErrCorrupt = errors.New("wal: corrupt log")

// intactScan bounds the search for intact records after a damaged one: a
// torn write ends within one commit's bytes, and an intact record after
// real damage starts within one record of it. Records after it must also
// end inside intactBuffer to be recognised.
const (
	intactScan   = 1 << 20
	intactBuffer = 2 << 20
)

// intactAfter reports the offset of the first intact record (its checksum
// salted for this segment) that starts after the damaged one at bad, or
// -1 if there is none within intactScan.
func intactAfter(f *os.File, bad, size int64, segSalt uint32) (int64, error) {
	n := min(size-bad, intactBuffer)
	if n <= headerSize {
		return -1, nil
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, bad); err != nil && err != io.EOF {
		return -1, err
	}
	for p := 1; p < intactScan && p+headerSize < len(buf); p++ {
		size, crc := readHeader(buf[p:])
		if size == 0 || p+headerSize+size > len(buf) {
			continue
		}
		if _, err := decodePayload(buf[p+headerSize:p+headerSize+size], crc^segSalt); err == nil {
			return bad + int64(p), nil
		}
	}
	return -1, nil
}

// damaged decides what a damaged record at off in the last segment is: a
// torn tail (nil: cut it off) or corruption (ErrCorrupt, saying where).
func damaged(f *os.File, path string, off, size int64, segSalt uint32, cause error) error {
	next, err := intactAfter(f, off, size, segSalt)
	if err != nil {
		return fmt.Errorf("wal segment %s: look past a damaged record at offset %d: %w", path, off, err)
	}
	if next < 0 {
		return nil
	}
	return fmt.Errorf("%w: segment %s has a damaged record at offset %d (%v) followed by an intact one at %d: "+
		"bytes that were synced have changed, and cutting the log there would drop entries this node acknowledged",
		ErrCorrupt, path, off, cause, next)
}
