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

// applyUpdate is the store's subscriber.
func (b *Broker) applyUpdate(origin string, changes []catalog.Change, reset *catalog.Snapshot) {
	<-b.ready
	w := b.store.(Watchable)
	switch {
	case reset != nil:
		b.applyReset(reset)
	case origin != w.Origin():
		b.applyChanges(changes)
	}
}

// applyChanges applies committed changes to the model.
func (b *Broker) applyChanges(changes []catalog.Change) {
	for _, c := range changes {
		switch {
		case c.Vhost != nil:
			b.applyVhost(*c.Vhost, c.Delete)
		case c.User != nil:
			b.mu.Lock()
			_, had := b.users[c.User.Name]
			if c.Delete {
				delete(b.users, c.User.Name)
			} else {
				b.users[c.User.Name] = *c.User
			}
			b.mu.Unlock()
			b.permEpoch.Add(1) // tags changed too: checks cached on channels are void
			if c.Delete && had {
				b.revoked(Revocation{User: c.User.Name, Reason: fmt.Sprintf("user '%s' is deleted", c.User.Name)})
			}
		case c.Permission != nil:
			p := *c.Permission
			b.mu.Lock()
			if c.Delete {
				delete(b.perms, permKey{p.User, p.Vhost})
			} else if cp, err := compilePermission(p); err == nil {
				b.perms[permKey{p.User, p.Vhost}] = cp
			} else {
				b.log.Warn("ignoring replicated permission", "user", p.User, "vhost", p.Vhost, "err", err)
			}
			b.mu.Unlock()
			b.permEpoch.Add(1)
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

func (b *Broker) vhost(name string) *Vhost {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.vhosts[name]
}

func (b *Broker) applyVhost(rec catalog.Vhost, del bool) {
	b.mu.Lock()
	v, ok := b.vhosts[rec.Name]
	switch {
	case del && ok:
		delete(b.vhosts, rec.Name)
	case !del && !ok:
		b.vhosts[rec.Name] = newVhost(b, rec)
	}
	b.mu.Unlock()
	if !del && ok {
		// What a vhost's record changes (SetVhostLimits). Not under
		// b.mu: a declare holds v.mu while placement takes b.mu.
		v.mu.Lock()
		v.limits = rec.Limits
		v.mu.Unlock()
	}
	if del && ok {
		// What is left are this node's transient and exclusive queues
		// (the durable ones were deleted before the vhost, in the same
		// change); its connections go, and their exclusive queues.
		v.close()
		b.revoked(Revocation{Vhost: rec.Name, Reason: fmt.Sprintf("vhost '%s' is deleted", rec.Name)})
	}
}

func (v *Vhost) applyExchange(rec catalog.Exchange, del bool) {
	if del {
		v.mu.Lock()
		if x, ok := v.exchanges[rec.Name]; ok {
			v.dropExchangeLocked(x)
		}
		v.mu.Unlock()
		return
	}
	v.mu.RLock()
	_, ok := v.exchanges[rec.Name]
	v.mu.RUnlock()
	if !ok {
		if err := v.restoreExchange(rec); err != nil {
			v.b.log.Warn("ignoring replicated exchange", "vhost", v.name, "exchange", rec.Name, "err", err)
		}
	}
}

func (v *Vhost) applyBinding(rec catalog.Binding, del bool) {
	key := bindingKey{destination: rec.Destination, routingKey: rec.RoutingKey, arguments: string(rec.Arguments), toExchange: rec.Kind == catalog.ToExchange}
	v.mu.Lock()
	x, ok := v.exchanges[rec.Source]
	var b *binding
	if ok {
		b = x.bindings[key]
	}
	if del && b != nil {
		x.remove(b)
	}
	v.mu.Unlock()
	if !del && ok && b == nil {
		if err := v.restoreBinding(rec); err != nil {
			v.b.log.Warn("ignoring replicated binding", "vhost", v.name, "source", rec.Source, "destination", rec.Destination, "err", err)
		}
	}
}

func (v *Vhost) applyQueue(rec catalog.Queue, del bool) {
	v.mu.RLock()
	q, ok := v.queues[rec.Name]
	v.mu.RUnlock()
	switch {
	case del && ok && (rec.ID == "" || q.rec.ID == rec.ID):
		v.dropQueue(q)
	case !del && ok && q.rec.ID != rec.ID:
		// Deleted and declared again while this node was not looking.
		v.dropQueue(q)
		fallthrough
	case !del && (!ok || q.rec.ID != rec.ID):
		if err := v.restoreQueue(rec); err != nil {
			v.b.log.Warn("cannot start replicated queue", "vhost", v.name, "queue", rec.Name, "err", err)
		}
	case !del && ok && isReplicated(rec, 0):
		// The same queue, its record changed: a member was added or
		// removed (members.go).
		v.applyMembers(q, rec)
	}
}

// dropQueue removes a queue another node deleted: its bindings, and this
// node's side of it (its replica's files, when a member).
func (v *Vhost) dropQueue(q *Queue) {
	v.mu.Lock()
	if v.queues[q.rec.Name] != q {
		v.mu.Unlock()
		return
	}
	delete(v.queues, q.rec.Name)
	v.b.served.remove(q)
	for b, x := range q.bindings {
		x.remove(b)
	}
	v.mu.Unlock()
	// Not on this goroutine: it applies every metadata change in order,
	// and deleting a replicated queue's engine may wait for its group
	// (a queue deleted moments after its declaration has no leader yet),
	// which held up every later change, new queues' elections included.
	go q.engine.Delete(false, false)
}

// applyReset brings the model to a whole new state (the metadata group
// sent this node a snapshot): what the state lacks is removed, what it
// has is applied.
func (b *Broker) applyReset(snap *catalog.Snapshot) {
	b.resetNodes(snap.Nodes) // nodes.go
	var gone []catalog.Change
	b.mu.RLock()
	for name := range b.users {
		if !slices.ContainsFunc(snap.Users, func(u catalog.User) bool { return u.Name == name }) {
			gone = append(gone, catalog.Del(catalog.User{Name: name}))
		}
	}
	for k := range b.perms {
		if !slices.ContainsFunc(snap.Permissions, func(p catalog.Permission) bool { return p.User == k.user && p.Vhost == k.vhost }) {
			gone = append(gone, catalog.Del(catalog.Permission{User: k.user, Vhost: k.vhost}))
		}
	}
	vhosts := make([]*Vhost, 0, len(b.vhosts))
	for name, v := range b.vhosts {
		if !slices.ContainsFunc(snap.Vhosts, func(r catalog.Vhost) bool { return r.Name == name }) {
			gone = append(gone, catalog.Del(catalog.Vhost{Name: name}))
			continue
		}
		vhosts = append(vhosts, v)
	}
	b.mu.RUnlock()
	for _, v := range vhosts {
		v.mu.RLock()
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
		v.mu.RUnlock()
	}
	// Bindings first, then what they connect, then vhosts.
	slices.SortStableFunc(gone, func(a, b catalog.Change) int { return removalRank(a) - removalRank(b) })
	b.applyChanges(gone)
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
	b.applyChanges(puts)
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
