package replica

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/wal"
)

// Before raft starts on a member's existing state, the member checks that
// its log holds what raft will ask of it: restoring the latest snapshot
// needs the entries of the messages the snapshot lists as live (their
// bodies live nowhere else), and replaying after it needs every entry from
// the snapshot's index on. Raft itself would fall back to an older
// snapshot when the latest does not open, then panic on the first entry
// compaction removed; a live message with no entry would surface only
// when delivered. Either is damaged storage, answered like a damaged
// write-ahead log (wal.ErrCorrupt): the node sets the member's files aside
// and re-syncs it from the group (cluster/node's quarantine.go).
//
// What may legitimately be missing: a live message's entry that was
// settled after the snapshot was taken (compaction deletes what the
// machine no longer holds, and the machine runs ahead of its snapshot).
// Its settlement is an entry after the snapshot's index, so the log then
// reaches past that index; a log that does not is missing the entry.

// indexedLog is a log store that answers from its index which entries it
// holds (raftq/wal's Group).
type indexedLog interface {
	Has(index uint64) bool
	FirstGap(from, to uint64) (uint64, bool)
	FirstIndex() (uint64, error)
	LastIndex() (uint64, error)
}

// checkRestorable checks a member's snapshots and log against each other;
// an error wraps wal.ErrCorrupt when they disagree.
func checkRestorable(snaps raft.SnapshotStore, logs raftStore) error {
	ix, ok := logs.(indexedLog)
	if !ok {
		return nil
	}
	first, err := ix.FirstIndex()
	if err != nil {
		return err
	}
	last, err := ix.LastIndex()
	if err != nil {
		return err
	}
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("%w: list snapshots: %v", wal.ErrCorrupt, err)
	}
	if len(list) == 0 {
		// Compaction only follows a snapshot: with none, the log
		// starts at its first entry.
		if first > 1 {
			return fmt.Errorf("%w: no snapshot, and the log starts at entry %d: entries 1 to %d are gone", wal.ErrCorrupt, first, first-1)
		}
		return logGap(ix, 1, last)
	}
	latest := list[0]
	meta, rc, err := snaps.Open(latest.ID)
	if err != nil {
		return fmt.Errorf("%w: the latest snapshot %s (entry %d) does not open (%v); an older one would need entries compaction removed",
			wal.ErrCorrupt, latest.ID, latest.Index, err)
	}
	_, live, err := (&snapshotReader{r: bufio.NewReader(rc)}).readHead()
	rc.Close()
	if err != nil {
		return fmt.Errorf("%w: the latest snapshot %s: %v", wal.ErrCorrupt, latest.ID, err)
	}
	if err := logGap(ix, meta.Index+1, last); err != nil {
		return err
	}
	if last > meta.Index {
		return nil // a missing live entry may have been settled after the snapshot
	}
	for _, i := range live {
		if i <= meta.Index && !ix.Has(i) {
			return fmt.Errorf("%w: snapshot %s (entry %d) holds the message of entry %d, which the log no longer has and nothing after the snapshot settled",
				wal.ErrCorrupt, latest.ID, meta.Index, i)
		}
	}
	return nil
}

// logGap reports a missing entry in [from, to], which replay needs whole.
func logGap(ix indexedLog, from, to uint64) error {
	if gap, ok := ix.FirstGap(from, to); ok {
		return fmt.Errorf("%w: the log lacks entry %d of %d to %d, which replay needs", wal.ErrCorrupt, gap, from, to)
	}
	return nil
}

// IsDamaged reports whether err, from Open, says the member's storage is
// damaged: its write-ahead log or snapshots cannot be trusted, and the
// member must be re-synced from its group rather than started.
func IsDamaged(err error) bool { return errors.Is(err, wal.ErrCorrupt) }
