package metaraft

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster/catalog"
)

// Update is one applied change of the metadata state, as a subscriber
// sees it.
type Update struct {
	// Index is the Raft log index the state reflects after the update.
	Index uint64
	// Origin is the Origin() of the process run that proposed it (empty
	// for a Reset).
	Origin string
	// Changes are the entry's changes as committed. An entry refused
	// with ErrExists, or a repeat of a proposal already applied, changed
	// nothing and makes no Update.
	Changes []catalog.Change
	// Reset is set instead of Changes when a snapshot replaced the whole
	// state (a follower that fell behind the leader's log): it is the
	// whole new state.
	Reset *catalog.Snapshot

	// marker: an entry that changed nothing, passed along only so that
	// the subscriber's delivered index covers it; never given to fn.
	marker bool
}

// fsm adapts state to raft.FSM.
type fsm struct {
	mu sync.Mutex
	st *state
	// sub is nil until Subscribe; set under mu, read without it by
	// CatchUp, which polls it and applied.
	sub atomic.Pointer[subscriber]
	// applied is st's index, readable without mu.
	applied atomic.Uint64
}

var _ raft.FSM = (*fsm)(nil)

func newFSM() *fsm { return &fsm{st: newState()} }

// Apply applies one committed entry. An entry that does not decode was
// never proposed by this package (proposals and forwarded entries are
// checked first): applying around it would diverge, so stop loudly.
func (f *fsm) Apply(l *raft.Log) any {
	e, err := decodeEntry(l.Data)
	if err != nil {
		panic(fmt.Sprintf("meta: log entry %d: %v", l.Index, err))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.st.apply(l.Index, e)
	f.applied.Store(f.st.index)
	if sub := f.sub.Load(); sub != nil {
		if r.changed() {
			sub.push(Update{Index: l.Index, Origin: e.Origin, Changes: e.Changes})
		} else {
			// Nothing to tell, but the subscriber has seen this far
			// once what comes before is delivered (CatchUp).
			sub.push(Update{Index: l.Index, marker: true})
		}
	}
	return r
}

// Snapshot encodes the state now: metadata is small and changes rarely,
// so the bytes are the cheap reference.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := f.st.marshal()
	if err != nil {
		return nil, err
	}
	return snapshotBytes(data), nil
}

// Restore replaces the state with a snapshot's and tells the subscriber.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("meta: read snapshot: %w", err)
	}
	st, err := unmarshalState(data)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	f.applied.Store(st.index)
	if sub := f.sub.Load(); sub != nil {
		sub.push(Update{Index: st.index, Reset: st.snapshot()})
	}
	return nil
}

type snapshotBytes []byte

func (b snapshotBytes) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(b); err != nil {
		sink.Cancel()
		return fmt.Errorf("meta: write snapshot: %w", err)
	}
	return sink.Close()
}

func (snapshotBytes) Release() {}

// subscribe installs fn and returns the state and index it starts from.
func (f *fsm) subscribe(fn func(Update)) (*catalog.Snapshot, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sub.Load() != nil {
		panic("meta: Subscribe called twice")
	}
	sub := newSubscriber(fn)
	sub.delivered.Store(f.st.index)
	f.sub.Store(sub)
	go sub.run()
	return f.st.snapshot(), f.st.index
}

func (f *fsm) load() (*catalog.Snapshot, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.snapshot(), f.st.index
}

func (f *fsm) stop() {
	if sub := f.sub.Load(); sub != nil {
		sub.stop()
	}
}

// subscriber queues updates without bound (metadata changes are rare)
// and calls fn with them, in order, on its own goroutine.
type subscriber struct {
	fn func(Update)
	// delivered is the index of the last entry fn has been called for
	// (or skipped, having nothing to tell).
	delivered atomic.Uint64
	mu        sync.Mutex
	q         []Update
	wake      chan struct{}
	quit      chan struct{}
	done      chan struct{}
	once      sync.Once
}

func newSubscriber(fn func(Update)) *subscriber {
	return &subscriber{fn: fn, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

func (s *subscriber) push(u Update) {
	s.mu.Lock()
	s.q = append(s.q, u)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) run() {
	defer close(s.done)
	for {
		select {
		case <-s.quit:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		q := s.q
		s.q = nil
		s.mu.Unlock()
		for _, u := range q {
			select {
			case <-s.quit:
				return
			default:
			}
			if !u.marker {
				s.fn(u)
			}
			s.delivered.Store(u.Index)
		}
	}
}

// stop ends delivery (what is still queued is dropped) and waits for a
// call of fn in progress to return.
func (s *subscriber) stop() {
	s.once.Do(func() { close(s.quit) })
	<-s.done
}
