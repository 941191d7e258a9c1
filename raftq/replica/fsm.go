package replica

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
)

// fsm adapts the raftq machine to raft.FSM. Apply decodes the entry, runs
// the machine, and carries out the effects on the leader; the effects a
// proposer waits for come back as the entry's response.
type fsm struct {
	r *Replica

	mu      sync.Mutex
	m       *raftq.Machine
	cmd     raftq.Command // decoded into for every entry: no allocation
	effects []raftq.Effect
	// sinceSnap counts the entries applied since the last snapshot taken
	// or restored, for the watcher's snapshot trigger.
	sinceSnap uint64
	// dlxOnReject: x-overflow=reject-publish-dlx, a classic queue option
	// the machine does not know (answerPublish reads it, Reconfigure
	// changes it).
	dlxOnReject bool
}

// liveCount is how many messages the machine references, for sizing the
// buffers of a snapshot: with a large backlog they are megabytes, and
// growing them by doubling would leave three times that in garbage.
func liveCount(m *raftq.Machine) int {
	st := m.Stats()
	return st.Ready + st.Unacked + st.DeadLettered + st.Delayed
}

// result is the response of an entry whose proposer needs an answer
// (basic.consume, basic.get, queue.purge). Enqueues are answered through
// the machine's Confirm and Reject effects instead.
type result struct {
	effects []raftq.Effect
}

func (f *fsm) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := raftq.Decode(l.Data, &f.cmd); err != nil {
		// A committed entry this binary cannot read: applying the rest
		// would diverge from the other members. Stop loudly.
		panic(fmt.Sprintf("replica %s: entry %d: %v", f.r.name, l.Index, err))
	}
	if upTo := f.r.cfg.AppliesUpTo; upTo > 0 && f.cmd.Needs() > upTo {
		panic(fmt.Sprintf("replica %s: entry %d: %s needs machine version %d, this member applies up to %d", f.r.name, l.Index, f.cmd.Op, f.cmd.Needs(), upTo))
	}
	leader := f.r.isLeader()
	// current: an entry this member proposed as leader. One of an earlier
	// term was another leader's, which carried out its effects (or failed
	// first: see the cases below).
	current := leader && l.Term == f.r.leaderOf.Load().CurrentTerm()
	if current && !l.AppendedAt.IsZero() {
		now := time.Now()
		took := now.Sub(l.AppendedAt)
		f.r.commitLatency.Store(int64(took))
		f.r.pub.commitTook(took, now)
	}
	if current && f.cmd.Op == raftq.OpAttach {
		// Deliveries to the consumer are this member's to send from
		// here on.
		f.r.consumers.markAttached(f.cmd.Consumer)
	}
	if leader && f.cmd.Op == raftq.OpEnqueue {
		// Keep the message at hand: it is usually delivered moments later.
		f.r.storage.recent.put(l.Index, f.cmd.Payload)
	}
	f.sinceSnap++
	f.effects = f.m.Apply(raftq.Meta{Index: l.Index}, &f.cmd, f.effects[:0])
	x := entryContext{index: l.Index, op: f.cmd.Op, leader: leader, current: current}
	for _, e := range f.effects {
		dispatchEffect(f, &x, e)
	}
	f.r.watch.stateChanged()
	if x.answer == nil {
		return nil // no response at all, not a nil *result
	}
	return x.answer
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sinceSnap = 0
	n := liveCount(f.m)
	// About 9 bytes per message, plus the consumers and configuration.
	machine := f.m.AppendSnapshot(make([]byte, 0, 16*n+4096))
	live := f.m.AppendLiveIndexes(make([]uint64, 0, n))
	return &snapshot{data: appendSnapshotHead(make([]byte, 0, len(machine)+3*len(live)+16), machine, live)}, nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	m, err := restoreSnapshot(rc, f.r.storage.store)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.mu.Lock()
	f.m, f.sinceSnap = m, 0
	f.mu.Unlock()
	f.r.watch.stateChanged()
	return nil
}

// liveIndexes lists the indexes in [min, max] of messages the queue still
// holds, for the log store's compaction.
func (f *fsm) liveIndexes(min, max uint64) []uint64 {
	f.mu.Lock()
	all := f.m.AppendLiveIndexes(make([]uint64, 0, liveCount(f.m)))
	f.mu.Unlock()
	out := all[:0] // filtered in place
	for _, i := range all {
		if i >= min && i <= max {
			out = append(out, i)
		}
	}
	return out
}

// snapshot is the machine's state: fixed-size records, never bodies, so
// its cost follows the number of messages, not their size.
type snapshot struct{ data []byte }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
