package broker

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/warrenmq/warren/cluster/catalog"
)

// Node records: the operator's maintenance state of each node (warrenctl
// drain). They live in the replicated store like policies, so every
// node's placement reads the same set. Like v.persist, SetDraining holds
// the table's lock across the commit and the model's update, so that a
// remote change committed after this one (applied by the subscriber under
// the same lock) lands after it.

// nodeTable is the broker's copy of the node records, under a lock of
// its own.
type nodeTable struct {
	store catalog.Store
	log   *slog.Logger

	mu    sync.RWMutex
	nodes map[string]catalog.Node
	// onChange is OnDrainChange's function.
	onChange func(node string, draining bool)
}

func (t *nodeTable) init(store catalog.Store, log *slog.Logger) {
	t.store, t.log = store, log
}

// apply applies a node record and reports whether the node's drained
// state changed.
func (t *nodeTable) apply(rec catalog.Node, del bool) (changed bool) {
	if t.nodes == nil {
		t.nodes = map[string]catalog.Node{}
	}
	was := t.nodes[rec.Name].Draining
	if del || !rec.Draining {
		delete(t.nodes, rec.Name) // a node in service needs no record
		return was
	}
	t.nodes[rec.Name] = rec
	return !was
}

// OnDrainChange sets what runs when a node's drained state changes in
// this node's model, whoever committed it: the drained node keeps its
// queue members out of elections from that moment, not from its
// maintenance loop's next turn. fn must not block.
func (t *nodeTable) OnDrainChange(fn func(node string, draining bool)) {
	t.mu.Lock()
	t.onChange = fn
	t.mu.Unlock()
}

// applyNode applies a committed node record to the model.
func (t *nodeTable) applyNode(rec catalog.Node, del bool) {
	t.mu.Lock()
	changed := t.apply(rec, del)
	fn := t.onChange
	t.mu.Unlock()
	if changed && fn != nil {
		fn(rec.Name, rec.Draining && !del)
	}
}

// resetNodes replaces the node records with a snapshot's.
func (t *nodeTable) resetNodes(recs []catalog.Node) {
	t.mu.Lock()
	was := t.nodes
	t.nodes = nil
	for _, r := range recs {
		t.apply(r, false)
	}
	now, fn := t.nodes, t.onChange
	t.mu.Unlock()
	if fn == nil {
		return
	}
	for name := range was {
		if !now[name].Draining {
			fn(name, false)
		}
	}
	for name := range now {
		if !was[name].Draining {
			fn(name, true)
		}
	}
}

// SetDraining records that node is (or is no longer) drained, and returns
// once the change is committed.
func (t *nodeTable) SetDraining(node string, draining bool) error {
	if node == "" {
		return fmt.Errorf("a node name is required")
	}
	rec := catalog.Node{Name: node, Draining: draining}
	c := catalog.Put(rec)
	if !draining {
		c = catalog.Del(rec)
	}
	t.mu.Lock()
	if err := t.store.Apply(c); err != nil {
		t.mu.Unlock()
		return err
	}
	changed := t.apply(rec, !draining)
	fn := t.onChange
	t.mu.Unlock()
	t.log.Info("node maintenance state set", "node", node, "draining", draining)
	if changed && fn != nil {
		fn(node, draining)
	}
	return nil
}

// Draining reports whether node is drained.
func (t *nodeTable) Draining(node string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.nodes[node].Draining
}

// DrainingNodes are the drained nodes, sorted.
func (t *nodeTable) DrainingNodes() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.nodes))
	for n := range t.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
