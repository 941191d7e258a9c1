package broker

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/raftq/queue"
)

// In-memory queues on a cluster. An exclusive, auto-delete or transient
// queue keeps its messages in the memory of the node that declared it, as
// RabbitMQ's classic queues do, but like every other queue it is in the
// metadata: every node routes to it, its bindings and transient exchanges
// included, and reaches it through the owner node (Cluster.OpenRemote).
// A client connected anywhere can reply to a classic RPC client's
// exclusive queue or publish to a subscriber's; another node's exclusive
// queue is locked (405) to every connection but its owner, as on one node.
//
// Such a queue lives no longer than the start of its node that declared
// it (the record's Boot): the node removes the records of its earlier
// starts when it comes back (dropStale), and the others remove those of
// a node that failed or left (DropTransientOf).

// remoteOwner owns, on every other node, an exclusive queue of a
// connection to its node: no connection here is it.
const remoteOwner = ^OwnerID(0)

// shared reports whether this node is a cluster member, whose in-memory
// queues and transient exchanges are in the replicated metadata.
func (b *Broker) shared() bool { return b.cfg.Cluster != nil }

// InMemory reports whether rec is a queue kept in the memory of one node:
// on a cluster, the node its record names.
func InMemory(rec catalog.Queue) bool { return !isReplicated(rec, 0) }

// remote reports whether rec is another node's in-memory queue.
func (b *Broker) remote(rec catalog.Queue) bool {
	return b.shared() && InMemory(rec) && rec.ID != "" && len(rec.Members) > 0 && !slices.Contains(rec.Members, b.cfg.NodeID)
}

// recordedTransient reports whether rec is a transient queue recorded on
// a cluster: one that dies with the start of its node that declared it.
func recordedTransient(rec catalog.Queue) bool {
	return InMemory(rec) && !rec.Durable && rec.ID != ""
}

// ownTransient reports whether rec is one of this node's recorded
// transient queues.
func (b *Broker) ownTransient(rec catalog.Queue) bool {
	return b.shared() && recordedTransient(rec) && slices.Contains(rec.Members, b.cfg.NodeID)
}

// recorded reports whether the metadata store holds q's record.
func (q *Queue) recorded() bool { return q.rec.Durable || q.rec.ID != "" }

// recordsExchange reports whether the store holds the exchange: every
// one on a cluster, the durable ones on a standalone node.
func (g *exchangeGraph) recordsExchange(rec catalog.Exchange) bool {
	return rec.Durable || g.v.b.shared()
}

// transientQueues are the broker's side of in-memory queues on a
// cluster: the ones this node serves to the others, and the removal of
// the records that die with a start of a node.
type transientQueues struct {
	// b is the core: removals are committed through it and applied to
	// its model.
	b *Broker
	// served are this node's in-memory queues other nodes reach.
	served servedQueues
	// stopping is set once the node shuts down (Stopping).
	stopping atomic.Bool
}

// servedQueues are this node's recorded in-memory queues by ID, for the
// forward service: other nodes name them so.
type servedQueues struct {
	mu   sync.Mutex
	byID map[string]*Queue
}

func (s *servedQueues) add(q *Queue) {
	if q.rec.ID == "" || !InMemory(q.rec) || q.vhost.b.remote(q.rec) {
		return
	}
	s.mu.Lock()
	if s.byID == nil {
		s.byID = make(map[string]*Queue)
	}
	s.byID[q.rec.ID] = q
	s.mu.Unlock()
}

func (s *servedQueues) remove(q *Queue) {
	s.mu.Lock()
	if s.byID[q.rec.ID] == q {
		delete(s.byID, q.rec.ID)
	}
	s.mu.Unlock()
}

// ServedQueue is this node's in-memory queue with ID id, for other nodes'
// routers.
func (t *transientQueues) ServedQueue(id string) (queue.Queue, bool) {
	t.served.mu.Lock()
	q, ok := t.served.byID[id]
	t.served.mu.Unlock()
	if !ok {
		return nil, false
	}
	v := q.vhost
	v.mu.RLock()
	live := v.queues[q.rec.Name] == q
	v.mu.RUnlock()
	if !live {
		t.served.remove(q)
		return nil, false
	}
	return q.engine, true
}

// Stopping tells the broker that the node is shutting down: the transient
// queues its closing connections and consumers leave behind go with it
// without a metadata commit each (which, on the last node of a cluster or
// one cut off, could not commit and held up the shutdown for seconds per
// queue). The other nodes remove their records when the node leaves
// (DropTransientOf), or the node when it starts again (dropStale).
func (t *transientQueues) Stopping() { t.stopping.Store(true) }

// goesWithNode reports whether q, deleted now, need not be deleted
// through the metadata: a transient queue of this node, which is
// stopping.
func (t *transientQueues) goesWithNode(q *Queue) bool {
	return t.stopping.Load() && t.b.ownTransient(q.rec)
}

// staleRetry paces dropStale's and DropTransientOf's attempts while the
// metadata group has no leader.
const staleRetry = 2 * time.Second

// dropStale removes the records of this node's transient queues left from
// its earlier starts (it stopped or failed with them declared), once it
// has caught up with the metadata. Run once per start, on a cluster.
func (t *transientQueues) dropStale() {
	boot := t.b.cfg.Cluster.Boot()
	t.dropTransient("stale", func(rec catalog.Queue) bool {
		return slices.Contains(rec.Members, t.b.cfg.NodeID) && rec.Boot != boot
	})
}

// DropTransientOf removes the records of the transient queues that node's
// start boot declared: the node failed or left, and they are gone with
// it. Another start of the node removes its own (dropStale).
func (t *transientQueues) DropTransientOf(node, boot string) {
	t.dropTransient("gone with node "+node, func(rec catalog.Queue) bool {
		return slices.Contains(rec.Members, node) && rec.Boot == boot
	})
}

// dropTransient removes the recorded transient queues pick selects, with
// their bindings and the auto-delete exchanges left without any, retrying
// until the metadata takes it or the broker closes (the node waits for
// this on its way down, when the others may be gone).
func (t *transientQueues) dropTransient(why string, pick func(catalog.Queue) bool) {
	w, ok := t.b.store.(Watchable)
	if !ok {
		return
	}
	for {
		n, err := t.tryDropTransient(w, pick)
		if err == nil {
			if n > 0 {
				t.b.log.Info("removed transient queues", "why", why, "queues", n)
			}
			return
		}
		t.b.log.Debug("remove transient queues; will retry", "why", why, "err", err)
		select {
		case <-t.b.ctx.Done():
			return
		case <-time.After(staleRetry):
		}
	}
}

// tryDropTransient is one attempt of dropTransient: it catches up with
// the metadata, then removes what pick selects, and returns how many
// queues that was.
func (t *transientQueues) tryDropTransient(w Watchable, pick func(catalog.Queue) bool) (int, error) {
	ctx, cancel := context.WithTimeout(t.b.ctx, catchUpTimeout)
	defer cancel()
	if err := w.CatchUp(ctx); err != nil {
		return 0, err
	}
	snap, err := w.Load()
	if err != nil {
		return 0, err
	}
	changes, n := transientRemovals(snap, pick)
	if n == 0 {
		return 0, nil
	}
	if err := w.ApplyContext(ctx, changes...); err != nil {
		return 0, err
	}
	// The model takes what this node proposes from the proposer, not
	// from the store (replicated.go).
	t.b.applyChanges(changes)
	return n, nil
}

// transientRemovals are the changes removing the in-memory transient
// queues of snap that pick selects, the bindings to them, and the
// auto-delete exchanges those were the last bindings of; n counts the
// queues.
func transientRemovals(snap *catalog.Snapshot, pick func(catalog.Queue) bool) (changes []catalog.Change, n int) {
	type key struct{ vhost, name string }
	gone := map[key]bool{}
	for _, q := range snap.Queues {
		if recordedTransient(q) && pick(q) {
			gone[key{q.Vhost, q.Name}] = true
			changes = append(changes, catalog.Del(q))
		}
	}
	if len(gone) == 0 {
		return nil, 0
	}
	n = len(changes)
	left := map[key]int{} // bindings each exchange keeps
	var unbind []catalog.Change
	for _, bd := range snap.Bindings {
		if bd.Kind == catalog.ToQueue && gone[key{bd.Vhost, bd.Destination}] {
			unbind = append(unbind, catalog.Del(bd))
			left[key{bd.Vhost, bd.Source}] += 0
			continue
		}
		left[key{bd.Vhost, bd.Source}]++
	}
	for _, x := range snap.Exchanges {
		if c, ok := left[key{x.Vhost, x.Name}]; ok && c == 0 && x.AutoDelete {
			unbind = append(unbind, catalog.Del(x))
		}
	}
	// Bindings first, as a deletion through the model would order them.
	return append(unbind, changes...), n
}
