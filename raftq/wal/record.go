package wal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// A record on disk is an 8-byte header (the payload's length and its
// CRC-32C XORed with the segment's salt, both little-endian uint32) and
// the payload: a kind byte, the group's ID (uvarint length, bytes) and the
// kind's fields. A zero length ends a segment: a record always has at
// least its kind byte. Records are encoded with the bare checksum; the
// committer salts them once it knows their segment.
const headerSize = 8

// salt is what the checksums of segment id's records are XORed with.
// Segment files are recycled (wal.go): past the last record of the current
// use, a file holds whole records of an earlier one, and a crash that
// loses the end of a write can leave one exactly where replay looks next.
// Salted with another segment's ID, it fails the check and ends replay
// there. The multiplier is odd, so distinct IDs have distinct salts.
func salt(id uint32) uint32 { return id * 0x9e3779b1 }

// saltRecords XORs the checksum of every record in b, which holds whole
// records, with s (applying it twice takes it off again).
func saltRecords(b []byte, s uint32) {
	for len(b) >= headerSize {
		n, crc := readHeader(b)
		if headerSize+n > len(b) {
			return // not a whole record: not ours to salt
		}
		binary.LittleEndian.PutUint32(b[4:], crc^s)
		b = b[headerSize+n:]
	}
}

// maxRecord bounds a record's payload so that a corrupt length cannot make
// replay allocate gigabytes; it is far above any message Warren accepts.
const maxRecord = 1 << 30

const (
	kindEntry  byte = 1 // index, term, type, appended-at, data, extensions
	kindDelete byte = 2 // min, max: entries [min, max] are gone
	kindSet    byte = 3 // key, value of the group's stable store
	kindDrop   byte = 4 // the group and everything in it are gone
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var errCorrupt = errors.New("wal: corrupt record")

// beginRecord appends a header placeholder and the common payload prefix;
// endRecord fills the header in once the payload is complete.
func beginRecord(buf []byte, kind byte, group string) ([]byte, int) {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0, kind)
	buf = binary.AppendUvarint(buf, uint64(len(group)))
	return append(buf, group...), start
}

func endRecord(buf []byte, start int) []byte {
	payload := buf[start+headerSize:]
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, crcTable))
	return buf
}

func appendEntry(buf []byte, group string, l *raft.Log) []byte {
	buf, start := beginRecord(buf, kindEntry, group)
	buf = binary.AppendUvarint(buf, l.Index)
	buf = binary.AppendUvarint(buf, l.Term)
	buf = append(buf, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	buf = binary.AppendVarint(buf, at)
	buf = binary.AppendUvarint(buf, uint64(len(l.Extensions)))
	buf = append(buf, l.Extensions...)
	buf = append(buf, l.Data...) // the rest of the payload
	return endRecord(buf, start)
}

func appendDelete(buf []byte, group string, min, max uint64) []byte {
	buf, start := beginRecord(buf, kindDelete, group)
	buf = binary.AppendUvarint(buf, min)
	buf = binary.AppendUvarint(buf, max)
	return endRecord(buf, start)
}

func appendSet(buf []byte, group string, key, val []byte) []byte {
	buf, start := beginRecord(buf, kindSet, group)
	buf = binary.AppendUvarint(buf, uint64(len(key)))
	buf = append(buf, key...)
	buf = append(buf, val...)
	return endRecord(buf, start)
}

func appendDrop(buf []byte, group string) []byte {
	buf, start := beginRecord(buf, kindDrop, group)
	return endRecord(buf, start)
}

// readHeader returns the payload length of the record starting at b, which
// holds at least headerSize bytes; 0 marks the end of a segment.
func readHeader(b []byte) (size int, crc uint32) {
	return int(binary.LittleEndian.Uint32(b)), binary.LittleEndian.Uint32(b[4:])
}

// record is a decoded payload. Its byte slices alias the payload.
type record struct {
	kind     byte
	group    []byte
	index    uint64 // entry
	min, max uint64 // delete
	key, val []byte // set
	rest     []byte // entry: the fields after the index
}

// decodePayload checks payload against crc and splits it into a record.
func decodePayload(payload []byte, crc uint32) (record, error) {
	var r record
	if crc32.Checksum(payload, crcTable) != crc || len(payload) == 0 {
		return r, errCorrupt
	}
	d := decoder{b: payload[1:]}
	r.kind = payload[0]
	r.group = d.bytes()
	switch r.kind {
	case kindEntry:
		r.index = d.uvarint()
		r.rest = d.b
	case kindDelete:
		r.min, r.max = d.uvarint(), d.uvarint()
		if len(d.b) != 0 {
			d.fail()
		}
	case kindSet:
		r.key = d.bytes()
		r.val = d.b
	case kindDrop:
		if len(d.b) != 0 {
			d.fail()
		}
	default:
		return r, errCorrupt
	}
	if d.bad {
		return r, errCorrupt
	}
	return r, nil
}

// decodeEntry fills l from an entry record's fields after the index. Data
// and Extensions alias rest.
func decodeEntry(index uint64, rest []byte, l *raft.Log) error {
	d := decoder{b: rest}
	term := d.uvarint()
	typ := d.byte()
	at := d.varint()
	ext := d.bytes()
	if d.bad {
		return errCorrupt
	}
	*l = raft.Log{Index: index, Term: term, Type: raft.LogType(typ)}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	if len(ext) > 0 {
		l.Extensions = ext
	}
	if len(d.b) > 0 {
		l.Data = d.b
	}
	return nil
}

// decoder reads fields off b; the first malformed one sets bad and every
// later read returns zero values.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if uint64(len(d.b)) < n {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) fail() { d.bad = true; d.b = nil }
