package wal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// segmentReader reads a segment's records in order, for replay.
type segmentReader struct {
	r       *bufio.Reader
	size    int64 // the file's size: no record reaches past it
	salt    uint32
	off     int64 // offset of the next record
	header  [headerSize]byte
	payload []byte
}

func newSegmentReader(r io.Reader, size int64, salt uint32) *segmentReader {
	return &segmentReader{r: bufio.NewReaderSize(r, 1<<20), size: size, salt: salt}
}

// next returns the next record and its length on disk (header included),
// io.EOF at the clean end of the segment (end of file, or a zero length:
// nothing was ever written there), or an error for a torn or damaged
// record. The record aliases a buffer reused by the following call.
func (s *segmentReader) next() (record, int, error) {
	if n, err := io.ReadFull(s.r, s.header[:]); err != nil {
		if err == io.EOF || allZero(s.header[:n]) {
			// The end, or the last few bytes of a zero-filled tail.
			return record{}, 0, io.EOF
		}
		return record{}, 0, fmt.Errorf("%w: short header", errCorrupt)
	}
	size, crc := readHeader(s.header[:])
	if size == 0 && crc == 0 {
		return record{}, 0, io.EOF
	}
	if size == 0 || size > maxRecord || s.off+int64(headerSize+size) > s.size {
		return record{}, 0, fmt.Errorf("%w: length %d", errCorrupt, size)
	}
	if cap(s.payload) < size {
		s.payload = make([]byte, size)
	}
	p := s.payload[:size]
	if _, err := io.ReadFull(s.r, p); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
			return record{}, 0, fmt.Errorf("%w: short payload", errCorrupt)
		}
		return record{}, 0, err
	}
	rec, err := decodePayload(p, crc^s.salt)
	if err != nil {
		return record{}, 0, err
	}
	s.off += int64(headerSize + size)
	return rec, headerSize + size, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
