package broker

import (
	"fmt"
	"slices"

	"github.com/warrenmq/warren/cluster/catalog"
)

// This file applies metadata that other nodes committed. On a cluster
// member the broker's model is a copy of the replicated store: changes
// proposed here are applied to the model by the code that proposed them
// (under the vhost lock, in commit order), and changes committed by other
// nodes arrive here, in log order, and are applied the same way. Every
// apply is idempotent, so a change that reaches the model twice (a
// snapshot after an update) does no harm.

// metadataApplier applies committed metadata to the model: the
// snapshot a start restores, the changes the store's subscriber hands
// over, and a whole new state (applyReset).
type metadataApplier struct {
	// b is the core, whose parts it applies changes to.
	b *Broker
	// ready is closed once the model is restored, for updates from the
	// cluster that arrive meanwhile; nil on a standalone node.
	ready chan struct{}
}

// restore loads snap into a model not yet shared with anything: a start.
func (m *metadataApplier) restore(snap *catalog.Snapshot) error {
	b := m.b
	b.resetNodes(snap.Nodes) // nodes.go
	if err := b.restoreAccess(snap); err != nil {
		return err
	}
	b.restoreVhosts(snap)
	// Policies before what they apply to.
	for _, p := range snap.Policies {
		v := b.vhost(p.Vhost)
		if v == nil {
			return fmt.Errorf("policy %q refers to missing vhost %q", p.Name, p.Vhost)
		}
		v.applyPolicy(p, false)
	}
	for _, x := range snap.Exchanges {
		v := b.vhost(x.Vhost)
		if v == nil {
			return fmt.Errorf("exchange %q refers to missing vhost %q", x.Name, x.Vhost)
		}
		if err := v.restoreExchange(x); err != nil {
			return err
		}
	}
	for _, q := range snap.Queues {
		v := b.vhost(q.Vhost)
		if v == nil {
			return fmt.Errorf("queue %q refers to missing vhost %q", q.Name, q.Vhost)
		}
		if err := v.restoreQueue(q); err != nil {
			return err
		}
	}
	for _, bd := range snap.Bindings {
		v := b.vhost(bd.Vhost)
		if v == nil {
			return fmt.Errorf("binding refers to missing vhost %q", bd.Vhost)
		}
		if err := v.restoreBinding(bd); err != nil {
			b.log.Warn("dropping stored binding", "vhost", bd.Vhost, "source", bd.Source, "destination", bd.Destination, "err", err)
		}
	}
	return nil
}

// applyUpdate is the store's subscriber.
func (m *metadataApplier) applyUpdate(origin string, changes []catalog.Change, reset *catalog.Snapshot) {
	<-m.ready
	w := m.b.store.(Watchable)
	switch {
	case reset != nil:
		m.applyReset(reset)
	case origin != w.Origin():
		m.applyChanges(changes)
	}
}

// applyChanges applies committed changes to the model, each to the part
// that holds its kind of record.
func (m *metadataApplier) applyChanges(changes []catalog.Change) {
	b := m.b
	for _, c := range changes {
		switch {
		case c.Vhost != nil:
			b.applyVhost(*c.Vhost, c.Delete)
		case c.User != nil:
			b.applyUser(*c.User, c.Delete)
		case c.Permission != nil:
			b.applyPermission(*c.Permission, c.Delete)
		case c.Exchange != nil:
			if v := b.vhost(c.Exchange.Vhost); v != nil {
				v.applyExchange(*c.Exchange, c.Delete)
			}
		case c.Queue != nil:
			if v := b.vhost(c.Queue.Vhost); v != nil {
				v.applyQueue(*c.Queue, c.Delete)
			}
		case c.Binding != nil:
			if v := b.vhost(c.Binding.Vhost); v != nil {
				v.applyBinding(*c.Binding, c.Delete)
			}
		case c.Policy != nil:
			if v := b.vhost(c.Policy.Vhost); v != nil {
				v.applyPolicy(*c.Policy, c.Delete)
			}
		case c.Node != nil: // nodes.go
			b.applyNode(*c.Node, c.Delete)
		}
	}
}

// applyReset brings the model to a whole new state (the metadata group
// sent this node a snapshot): what the state lacks is removed, what it
// has is applied.
func (m *metadataApplier) applyReset(snap *catalog.Snapshot) {
	b := m.b
	b.resetNodes(snap.Nodes) // nodes.go
	gone := b.accessControl.absentFrom(snap, nil)
	gone, vhosts := b.vhostTable.absentFrom(snap, gone)
	for _, v := range vhosts {
		gone = v.absentFrom(snap, gone)
	}
	// Bindings first, then what they connect, then vhosts.
	slices.SortStableFunc(gone, func(a, b catalog.Change) int { return removalRank(a) - removalRank(b) })
	m.applyChanges(gone)
	var puts []catalog.Change
	for _, r := range snap.Users {
		puts = append(puts, catalog.Put(r))
	}
	for _, r := range snap.Vhosts {
		puts = append(puts, catalog.Put(r))
	}
	for _, r := range snap.Permissions {
		puts = append(puts, catalog.Put(r))
	}
	for _, r := range snap.Policies {
		puts = append(puts, catalog.Put(r))
	}
	for _, r := range snap.Exchanges {
		puts = append(puts, catalog.Put(r))
	}
	for _, r := range snap.Queues {
		puts = append(puts, catalog.Put(r))
	}
	for _, r := range snap.Bindings {
		puts = append(puts, catalog.Put(r))
	}
	m.applyChanges(puts)
}

func (g *exchangeGraph) applyExchange(rec catalog.Exchange, del bool) {
	if del {
		g.v.mu.Lock()
		if x, ok := g.exchanges[rec.Name]; ok {
			g.dropExchangeLocked(x)
		}
		g.v.mu.Unlock()
		return
	}
	g.v.mu.RLock()
	_, ok := g.exchanges[rec.Name]
	g.v.mu.RUnlock()
	if !ok {
		if err := g.restoreExchange(rec); err != nil {
			g.v.b.log.Warn("ignoring replicated exchange", "vhost", g.v.name, "exchange", rec.Name, "err", err)
		}
	}
}

func (g *exchangeGraph) applyBinding(rec catalog.Binding, del bool) {
	key := bindingKey{destination: rec.Destination, routingKey: rec.RoutingKey, arguments: string(rec.Arguments), toExchange: rec.Kind == catalog.ToExchange}
	g.v.mu.Lock()
	x, ok := g.exchanges[rec.Source]
	var b *binding
	if ok {
		b = x.bindings[key]
	}
	if del && b != nil {
		x.remove(b)
	}
	g.v.mu.Unlock()
	if !del && ok && b == nil {
		if err := g.restoreBinding(rec); err != nil {
			g.v.b.log.Warn("ignoring replicated binding", "vhost", g.v.name, "source", rec.Source, "destination", rec.Destination, "err", err)
		}
	}
}

func (qt *queueTable) applyQueue(rec catalog.Queue, del bool) {
	qt.v.mu.RLock()
	q, ok := qt.queues[rec.Name]
	qt.v.mu.RUnlock()
	switch {
	case del && ok && (rec.ID == "" || q.rec.ID == rec.ID):
		qt.dropQueue(q)
	case !del && ok && q.rec.ID != rec.ID:
		// Deleted and declared again while this node was not looking.
		qt.dropQueue(q)
		fallthrough
	case !del && (!ok || q.rec.ID != rec.ID):
		if err := qt.restoreQueue(rec); err != nil {
			qt.v.b.log.Warn("cannot start replicated queue", "vhost", qt.v.name, "queue", rec.Name, "err", err)
		}
	case !del && ok && isReplicated(rec, 0):
		// The same queue, its record changed: a member was added or
		// removed (members.go).
		qt.applyMembers(q, rec)
	}
}

// dropQueue removes a queue another node deleted: its bindings, and this
// node's side of it (its replica's files, when a member).
func (qt *queueTable) dropQueue(q *Queue) {
	qt.v.mu.Lock()
	if qt.queues[q.rec.Name] != q {
		qt.v.mu.Unlock()
		return
	}
	delete(qt.queues, q.rec.Name)
	qt.v.b.served.remove(q)
	for b, x := range q.bindings {
		x.remove(b)
	}
	qt.v.mu.Unlock()
	// Not on this goroutine: it applies every metadata change in order,
	// and deleting a replicated queue's engine may wait for its group
	// (a queue deleted moments after its declaration has no leader yet),
	// which held up every later change, new queues' elections included.
	go q.engine.Delete(false, false)
}

// absentFrom appends to gone the deletions of the vhost's recorded
// queues, policies, exchanges and bindings that snap lacks (applyReset).
func (v *Vhost) absentFrom(snap *catalog.Snapshot, gone []catalog.Change) []catalog.Change {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, q := range v.queues {
		if q.recorded() && !slices.ContainsFunc(snap.Queues, func(r catalog.Queue) bool { return r.Vhost == v.name && r.Name == q.rec.Name }) {
			gone = append(gone, catalog.Del(q.rec))
		}
	}
	for _, set := range []map[string]*policy{v.policies, v.opPolicies} {
		for _, p := range set {
			if !slices.ContainsFunc(snap.Policies, func(r catalog.Policy) bool {
				return r.Vhost == v.name && r.Name == p.rec.Name && r.Operator == p.rec.Operator
			}) {
				gone = append(gone, catalog.Del(p.rec))
			}
		}
	}
	for _, x := range v.exchanges {
		if v.recordsExchange(x.rec) && x.rec.Name != "" && !slices.ContainsFunc(snap.Exchanges, func(r catalog.Exchange) bool { return r.Vhost == v.name && r.Name == x.rec.Name }) && !isPredeclared(x.rec.Name) {
			gone = append(gone, catalog.Del(x.rec))
		}
		for _, bd := range x.bindings {
			if rec, recorded := v.bindingRecord(x, bd); recorded && !slices.ContainsFunc(snap.Bindings, func(r catalog.Binding) bool { return bindingEqual(r, rec) }) {
				gone = append(gone, catalog.Del(rec))
			}
		}
	}
	return gone
}

func removalRank(c catalog.Change) int {
	switch {
	case c.Binding != nil:
		return 0
	case c.Queue != nil, c.Exchange != nil, c.Policy != nil:
		return 1
	}
	return 2
}

func bindingEqual(a, b catalog.Binding) bool {
	return a.Vhost == b.Vhost && a.Source == b.Source && a.Destination == b.Destination &&
		a.Kind == b.Kind && a.RoutingKey == b.RoutingKey && string(a.Arguments) == string(b.Arguments)
}

func isPredeclared(name string) bool {
	return slices.ContainsFunc(predeclared, func(x catalog.Exchange) bool { return x.Name == name })
}
