package replica

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
)

// A queue snapshot is the machine's state and the indexes of the messages
// it references, never their bodies: its cost follows the number of
// messages, not their size. The bodies live in the log, kept there by
// live-index compaction. A member that is sent a snapshot has no such log
// entries, though, so when a snapshot is opened (to be sent, or to be
// restored at start) the bodies of its live messages are appended from
// the log: the receiver writes them into its own log at their original
// indexes and terms, and can serve every message once it leads.
//
// Layout, all integers unsigned varints:
//
//	"WQS1" | len | machine snapshot | count | live index deltas
//	count | (index delta, term, len, entry data)...   ← added by Open
var snapshotMagic = []byte("WQS1")

// appendSnapshotHead encodes the part an FSM snapshot persists.
func appendSnapshotHead(buf []byte, machine []byte, live []uint64) []byte {
	buf = append(buf, snapshotMagic...)
	buf = binary.AppendUvarint(buf, uint64(len(machine)))
	buf = append(buf, machine...)
	buf = binary.AppendUvarint(buf, uint64(len(live)))
	prev := uint64(0)
	for _, i := range live {
		buf = binary.AppendUvarint(buf, i-prev)
		prev = i
	}
	return buf
}

var errBadSnapshot = errors.New("replica: malformed snapshot")

// snapshotReader decodes a snapshot stream.
type snapshotReader struct {
	r *bufio.Reader
}

func (s *snapshotReader) uvarint() (uint64, error) {
	v, err := binary.ReadUvarint(s.r)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errBadSnapshot, err)
	}
	return v, nil
}

// readChunk is the most a field's buffer grows by before its bytes have
// arrived.
const readChunk = 64 << 10

// bytes reads a length-prefixed field, refusing lengths beyond limit.
// Memory follows the bytes read, not the length claimed: a snapshot comes
// from a peer, and a corrupt or hostile length must not allocate
// gigabytes for a stream that ends a few bytes later.
func (s *snapshotReader) bytes(limit uint64) ([]byte, error) {
	n, err := s.uvarint()
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%w: field of %d bytes", errBadSnapshot, n)
	}
	b := make([]byte, 0, min(n, readChunk))
	for uint64(len(b)) < n {
		k := int(min(n-uint64(len(b)), readChunk))
		b = slices.Grow(b, k)
		if _, err := io.ReadFull(s.r, b[len(b):len(b)+k]); err != nil {
			return nil, fmt.Errorf("%w: %v", errBadSnapshot, err)
		}
		b = b[:len(b)+k]
	}
	return b, nil
}

// readHead reads the machine snapshot and the live indexes.
func (s *snapshotReader) readHead() (machine []byte, live []uint64, err error) {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(s.r, magic); err != nil || string(magic) != string(snapshotMagic) {
		return nil, nil, fmt.Errorf("%w: bad header", errBadSnapshot)
	}
	if machine, err = s.bytes(1 << 34); err != nil {
		return nil, nil, err
	}
	n, err := s.uvarint()
	if err != nil {
		return nil, nil, err
	}
	prev := uint64(0)
	for range n {
		d, err := s.uvarint()
		if err != nil {
			return nil, nil, err
		}
		prev += d
		live = append(live, prev)
	}
	return machine, live, nil
}

// bodyStore wraps the file snapshot store so that opening a snapshot
// appends the log entries of its live messages.
type bodyStore struct {
	raft.SnapshotStore
	logs raft.LogStore
}

func (s *bodyStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	head, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("read snapshot %s: %w", id, err)
	}
	_, live, err := (&snapshotReader{r: bufio.NewReader(bytes.NewReader(head))}).readHead()
	if err != nil {
		return nil, nil, err
	}
	// The entries that still exist and that the snapshot needs; their
	// size is known before they are streamed, since raft sends a
	// snapshot's size ahead of it.
	var present []uint64
	var size int64
	var l raft.Log
	for _, i := range live {
		if i > meta.Index {
			break // replicated as ordinary entries
		}
		if err := s.logs.GetLog(i, &l); err != nil {
			continue // settled since the snapshot: the log says so later
		}
		present = append(present, i)
		size += int64(uvarintLen(i) + uvarintLen(l.Term) + uvarintLen(uint64(len(l.Data))) + len(l.Data))
	}
	countBuf := binary.AppendUvarint(nil, uint64(len(present)))
	meta.Size = int64(len(head)) + int64(len(countBuf)) + size
	bodies := &bodyStream{logs: s.logs, indexes: present}
	return meta, readCloser{io.MultiReader(bytes.NewReader(head), bytes.NewReader(countBuf), bodies)}, nil
}

func uvarintLen(v uint64) int { return len(binary.AppendUvarint(nil, v)) }

// bodyStream yields the encoded entries one at a time, so a large backlog
// is never held in memory whole.
type bodyStream struct {
	logs    raft.LogStore
	indexes []uint64
	prev    uint64
	buf     []byte
}

func (b *bodyStream) Read(p []byte) (int, error) {
	for len(b.buf) == 0 {
		if len(b.indexes) == 0 {
			return 0, io.EOF
		}
		i := b.indexes[0]
		b.indexes = b.indexes[1:]
		var l raft.Log
		if err := b.logs.GetLog(i, &l); err != nil {
			// Gone between sizing and sending: the stream would be short
			// of its announced size, so fail the send rather than lie.
			return 0, fmt.Errorf("entry %d vanished while sending a snapshot: %w", i, err)
		}
		b.buf = binary.AppendUvarint(b.buf[:0], i)
		b.buf = binary.AppendUvarint(b.buf, l.Term)
		b.buf = binary.AppendUvarint(b.buf, uint64(len(l.Data)))
		b.buf = append(b.buf, l.Data...)
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

// restoreSnapshot reads a snapshot stream: it writes the message entries
// it carries into logs where they are missing and returns the machine.
func restoreSnapshot(r io.Reader, logs raft.LogStore) (*raftq.Machine, error) {
	sr := &snapshotReader{r: bufio.NewReaderSize(r, 64<<10)}
	machineBytes, _, err := sr.readHead()
	if err != nil {
		return nil, err
	}
	m, err := raftq.Restore(machineBytes)
	if err != nil {
		return nil, fmt.Errorf("restore machine: %w", err)
	}
	n, err := sr.uvarint()
	if err != nil {
		return nil, err
	}
	var batch []*raft.Log
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := logs.StoreLogs(batch)
		batch = batch[:0]
		return err
	}
	for range n {
		index, err := sr.uvarint()
		if err != nil {
			return nil, err
		}
		term, err := sr.uvarint()
		if err != nil {
			return nil, err
		}
		data, err := sr.bytes(1 << 31)
		if err != nil {
			return nil, err
		}
		var have raft.Log
		if logs.GetLog(index, &have) == nil && have.Term == term {
			continue // our own log already holds it (a restart)
		}
		batch = append(batch, &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: data})
		if len(batch) == 1024 {
			if err := flush(); err != nil {
				return nil, fmt.Errorf("write snapshot entries: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return nil, fmt.Errorf("write snapshot entries: %w", err)
	}
	return m, nil
}
