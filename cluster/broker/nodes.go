package broker

import (
	"fmt"
	"slices"
	"sync"

	"github.com/warrenmq/warren/cluster/catalog"
)

// Node records: the operator's maintenance state of each node (warrenctl
// drain). They live in the replicated store like policies, so every
// node's placement reads the same set. Like v.persist, SetDraining holds
// nodesMu across the commit and the model's update, so that a remote
// change committed after this one (applied by the subscriber under the
// same lock) lands after it.

// nodeTable is the broker's copy of the node records.
type nodeTable struct {
	mu    sync.RWMutex
	nodes map[string]catalog.Node
	// onChange is OnDrainChange's function.
	onChange func(node string, draining bool)
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
func (b *Broker) OnDrainChange(fn func(node string, draining bool)) {
	b.nodes.mu.Lock()
	b.nodes.onChange = fn
	b.nodes.mu.Unlock()
}

// applyNode applies a committed node record to the model.
func (b *Broker) applyNode(rec catalog.Node, del bool) {
	b.nodes.mu.Lock()
	changed := b.nodes.apply(rec, del)
	fn := b.nodes.onChange
	b.nodes.mu.Unlock()
	if changed && fn != nil {
		fn(rec.Name, rec.Draining && !del)
	}
}

// resetNodes replaces the node records with a snapshot's.
func (b *Broker) resetNodes(recs []catalog.Node) {
	b.nodes.mu.Lock()
	was := b.nodes.nodes
	b.nodes.nodes = nil
	for _, r := range recs {
		b.nodes.apply(r, false)
	}
	now, fn := b.nodes.nodes, b.nodes.onChange
	b.nodes.mu.Unlock()
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
func (b *Broker) SetDraining(node string, draining bool) error {
	if node == "" {
		return fmt.Errorf("a node name is required")
	}
	rec := catalog.Node{Name: node, Draining: draining}
	c := catalog.Put(rec)
	if !draining {
		c = catalog.Del(rec)
	}
	b.nodes.mu.Lock()
	if err := b.store.Apply(c); err != nil {
		b.nodes.mu.Unlock()
		return err
	}
	changed := b.nodes.apply(rec, !draining)
	fn := b.nodes.onChange
	b.nodes.mu.Unlock()
	b.log.Info("node maintenance state set", "node", node, "draining", draining)
	if changed && fn != nil {
		fn(node, draining)
	}
	return nil
}

// Draining reports whether node is drained.
func (b *Broker) Draining(node string) bool {
	b.nodes.mu.RLock()
	defer b.nodes.mu.RUnlock()
	return b.nodes.nodes[node].Draining
}

// DrainingNodes are the drained nodes, sorted.
func (b *Broker) DrainingNodes() []string {
	b.nodes.mu.RLock()
	defer b.nodes.mu.RUnlock()
	out := make([]string, 0, len(b.nodes.nodes))
	for n := range b.nodes.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
