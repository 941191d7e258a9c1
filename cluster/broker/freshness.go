package broker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/cluster/catalog"
)

// freshness knows whether this node's model may lag the replicated
// metadata, and catches it up with the metadata leader for a caller that
// missed an entity: declared through another node a moment ago, it is
// committed but maybe not applied here yet. On a standalone node the
// model is always current and every answer is the trivial one.
type freshness struct {
	// w is the store when other nodes write to it; nil on a standalone
	// node.
	w   Watchable
	log *slog.Logger

	// The fields below share catch-ups among the callers that miss.
	arrived atomic.Uint64 // tickets handed out
	mu      sync.Mutex    // held while a catch-up runs
	covered uint64        // tickets the last catch-up answered
	ok      bool          // its outcome
}

func (f *freshness) init(store catalog.Store, log *slog.Logger) {
	f.w, _ = store.(Watchable)
	f.log = log
}

// catchUp brings a cluster member's model up to every change committed
// anywhere before the call. It reports whether it caught up (false on a
// standalone node, where the model is always current).
//
// Many channels may miss at once (publishes, passive declares): a caller
// is answered by any catch-up that started after it arrived, so at most
// one runs at a time and each caller waits for at most two. The catch-up
// waits for the subscriber to apply what it lacks, which takes vhost
// locks: never call it with one held.
func (f *freshness) catchUp() bool {
	ticket := f.arrived.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.covered >= ticket {
		return f.ok
	}
	// Every caller with a ticket up to here arrived before this one starts.
	covers := f.arrived.Load()
	ok := f.catchUpOnce()
	f.covered, f.ok = covers, ok
	return ok
}

const catchUpTimeout = 10 * time.Second

// catchUpOnce is one catch-up with the metadata leader.
func (f *freshness) catchUpOnce() bool {
	if f.w == nil {
		return false
	}
	// Generous: this node applies the metadata log in order, opening the
	// replica of each queue it is a member of, so a burst of declares
	// through another node can keep it busy for seconds.
	ctx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
	defer cancel()
	if err := f.w.CatchUp(ctx); err != nil {
		f.log.Debug("metadata catch-up", "err", err)
		return false
	}
	return true
}

// lookAgainAfterMiss is for a lookup that missed: it reports whether the
// caller should look again. If this node's model may be behind, it
// catches up first (false if that fails). If not, the missing change may
// still have reached the model between the lookup and the check (the
// check sees an entry handed to the model meanwhile as nothing missing),
// so a second look is worth its cost, which only a miss pays.
func (f *freshness) lookAgainAfterMiss() bool { return !f.mayBeStale() || f.catchUp() }

// mayBeStale reports whether a miss in the model (no such exchange, no
// queue routed to) may be a change committed through another node that
// this one has not applied yet.
func (f *freshness) mayBeStale() bool { return f.w != nil && f.w.MayBeStale() }

// replaying reports whether the model may still be replaying the
// metadata after a start (Watchable.CaughtUp): what it holds may have
// been replaced long ago.
func (f *freshness) replaying() bool { return f.w != nil && !f.w.CaughtUp() }
