package broker

import (
	"fmt"
	"slices"
	"sync"

	"github.com/warrenmq/warren/cluster/metadata"
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
	nodes map[string]metadata.Node
}

func (t *nodeTable) apply(rec metadata.Node, del bool) {
	if t.nodes == nil {
		t.nodes = map[string]metadata.Node{}
	}
	if del || !rec.Draining {
		delete(t.nodes, rec.Name) // a node in service needs no record
		return
	}
	t.nodes[rec.Name] = rec
}

// applyNode applies a committed node record to the model.
func (b *Broker) applyNode(rec metadata.Node, del bool) {
	b.nodes.mu.Lock()
	b.nodes.apply(rec, del)
	b.nodes.mu.Unlock()
}

// resetNodes replaces the node records with a snapshot's.
func (b *Broker) resetNodes(recs []metadata.Node) {
	b.nodes.mu.Lock()
	b.nodes.nodes = nil
	for _, r := range recs {
		b.nodes.apply(r, false)
	}
	b.nodes.mu.Unlock()
}

// SetDraining records that node is (or is no longer) drained, and returns
// once the change is committed.
func (b *Broker) SetDraining(node string, draining bool) error {
	if node == "" {
		return fmt.Errorf("a node name is required")
	}
	rec := metadata.Node{Name: node, Draining: draining}
	c := metadata.Put(rec)
	if !draining {
		c = metadata.Del(rec)
	}
	b.nodes.mu.Lock()
	defer b.nodes.mu.Unlock()
	if err := b.store.Apply(c); err != nil {
		return err
	}
	b.nodes.apply(rec, !draining)
	b.log.Info("node maintenance state set", "node", node, "draining", draining)
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
