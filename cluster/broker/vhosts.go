package broker

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// vhostTable is the broker's vhosts by name, under a lock of its own that
// is only ever held to read or change the map: nothing takes another lock
// under it, and a vhost's own lock is taken after it is released. Adding
// and deleting vhosts, as rabbitmqctl's add_vhost and delete_vhost do, is
// here too.
type vhostTable struct {
	// b is the core: vhosts are committed through it, and a new Vhost
	// points back to it.
	b *Broker

	mu     sync.RWMutex
	vhosts map[string]*Vhost
}

func (t *vhostTable) init(b *Broker) {
	t.b = b
	t.vhosts = make(map[string]*Vhost)
}

// vhost is the vhost named name, nil if none.
func (t *vhostTable) vhost(name string) *Vhost {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.vhosts[name]
}

// selectVhosts is the vhost named vhost, or every vhost for "".
func (t *vhostTable) selectVhosts(vhost string) []*Vhost {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var vhosts []*Vhost
	for name, v := range t.vhosts {
		if vhost == "" || vhost == name {
			vhosts = append(vhosts, v)
		}
	}
	return vhosts
}

// HasVhosts reports whether the model holds any vhost: a cluster member
// that has not yet received the metadata has none.
func (t *vhostTable) HasVhosts() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.vhosts) > 0
}

// OpenVhost returns the vhost a user may use (connection.open). The
// refusal is connection-level NOT_ALLOWED, as in RabbitMQ; a node that may
// be behind catches up first, as Authenticate does.
func (t *vhostTable) OpenVhost(u *User, name string) (*Vhost, error) {
	v, ok, allowed := t.vhostFor(u, name)
	if (!ok || !allowed) && t.b.fresh.lookAgainAfterMiss() {
		v, ok, allowed = t.vhostFor(u, name)
	}
	if !ok || !allowed {
		t.b.log.Warn("vhost access refused", "user", u.Name, "vhost", name, "exists", ok)
		return nil, wire.Errorf(wire.NotAllowed, "access to vhost '%s' refused for user '%s'", name, u.Name)
	}
	return v, nil
}

func (t *vhostTable) vhostFor(u *User, name string) (v *Vhost, ok, allowed bool) {
	v = t.vhost(name)
	return v, v != nil, t.b.accessControl.Permitted(u.Name, name)
}

// AddVhost creates a vhost whose durable queues declared without
// x-queue-type get defaultQueueType ("" for the node's default).
func (t *vhostTable) AddVhost(name, defaultQueueType string) error {
	if name == "" {
		return invalidAccess("a vhost needs a name")
	}
	if defaultQueueType == "" {
		defaultQueueType = t.b.cfg.DefaultQueueType
	}
	if defaultQueueType != QueueTypeQuorum && defaultQueueType != QueueTypeClassic {
		return invalidAccess("default queue type %q: quorum or classic", defaultQueueType)
	}
	err := t.b.commit(catalog.Create(catalog.Vhost{Name: name, DefaultQueueType: defaultQueueType}))
	if errors.Is(err, catalog.ErrExists) {
		return fmt.Errorf("%w: %s", ErrVhostExists, name)
	}
	if err == nil {
		t.b.log.Info("vhost added", "vhost", name, "default_queue_type", defaultQueueType)
	}
	return err
}

// DeleteVhost deletes a vhost with everything in it: its queues (their
// messages and, for quorum queues, their Raft groups on every member),
// exchanges, bindings, policies and permissions; its client connections
// on every node are closed. The records go in one committed change, so no
// node sees part of the vhost gone; a second pass takes what was declared
// in it while the first was being committed.
func (t *vhostTable) DeleteVhost(name string) error {
	for pass := 0; pass < 2; pass++ {
		t.b.fresh.catchUp() // what other nodes committed in the vhost goes too
		snap, err := t.b.store.Load()
		if err != nil {
			return fmt.Errorf("read the metadata: %w", err)
		}
		changes := vhostRecords(snap, name)
		if pass == 0 && !slices.ContainsFunc(snap.Vhosts, func(v catalog.Vhost) bool { return v.Name == name }) {
			return fmt.Errorf("%w: %s", ErrNoVhost, name)
		}
		if len(changes) == 0 {
			break
		}
		if err := t.b.commit(changes...); err != nil {
			return err
		}
		if pass == 0 {
			t.b.log.Info("vhost deleted", "vhost", name, "records", len(changes))
		}
	}
	return nil
}

// vhostRecords are deletions of every record of vhost name in snap:
// bindings, then what they connect, then the vhost (removalRank).
func vhostRecords(snap *catalog.Snapshot, name string) []catalog.Change {
	var out []catalog.Change
	out = deletions(out, snap.Bindings, func(r catalog.Binding) bool { return r.Vhost == name })
	out = deletions(out, snap.Queues, func(r catalog.Queue) bool { return r.Vhost == name })
	out = deletions(out, snap.Exchanges, func(r catalog.Exchange) bool { return r.Vhost == name })
	out = deletions(out, snap.Policies, func(r catalog.Policy) bool { return r.Vhost == name })
	out = deletions(out, snap.Permissions, func(r catalog.Permission) bool { return r.Vhost == name })
	out = deletions(out, snap.Vhosts, func(r catalog.Vhost) bool { return r.Name == name })
	slices.SortStableFunc(out, func(a, b catalog.Change) int { return removalRank(a) - removalRank(b) })
	return out
}

// deletions appends to out the deletion of each record of recs that in
// selects.
func deletions[T any](out []catalog.Change, recs []T, in func(T) bool) []catalog.Change {
	for _, r := range recs {
		if in(r) {
			out = append(out, catalog.Del(r))
		}
	}
	return out
}

// Vhosts lists the vhosts by name.
func (t *vhostTable) Vhosts() []catalog.Vhost {
	vhosts := t.selectVhosts("")
	out := make([]catalog.Vhost, 0, len(vhosts))
	for _, v := range vhosts {
		v.mu.RLock()
		out = append(out, catalog.Vhost{Name: v.name, DefaultQueueType: v.defaultQueueType, Limits: maps.Clone(v.limits)})
		v.mu.RUnlock()
	}
	slices.SortFunc(out, func(x, y catalog.Vhost) int { return cmp.Compare(x.Name, y.Name) })
	return out
}

// restoreVhosts loads a snapshot's vhosts, before the broker is shared.
func (t *vhostTable) restoreVhosts(snap *catalog.Snapshot) {
	for _, v := range snap.Vhosts {
		t.vhosts[v.Name] = newVhost(t.b, v)
	}
}

// applyVhost applies a committed vhost record. A deleted vhost's queues
// left on this node close, and so do its connections.
func (t *vhostTable) applyVhost(rec catalog.Vhost, del bool) {
	t.mu.Lock()
	v, ok := t.vhosts[rec.Name]
	switch {
	case del && ok:
		delete(t.vhosts, rec.Name)
	case !del && !ok:
		t.vhosts[rec.Name] = newVhost(t.b, rec)
	}
	t.mu.Unlock()
	if !del && ok {
		// What a vhost's record changes (SetVhostLimits), under the
		// vhost's lock, which is never taken under the table's.
		v.setLimits(rec.Limits)
	}
	if del && ok {
		// What is left are this node's transient and exclusive queues
		// (the durable ones were deleted before the vhost, in the same
		// change); its connections go, and their exclusive queues.
		v.close()
		t.b.revoked(Revocation{Vhost: rec.Name, Reason: fmt.Sprintf("vhost '%s' is deleted", rec.Name)})
	}
}

// absentFrom appends to gone the deletions of the vhosts snap lacks, and
// returns the vhosts it keeps (applyReset).
func (t *vhostTable) absentFrom(snap *catalog.Snapshot, gone []catalog.Change) ([]catalog.Change, []*Vhost) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	vhosts := make([]*Vhost, 0, len(t.vhosts))
	for name, v := range t.vhosts {
		if !slices.ContainsFunc(snap.Vhosts, func(r catalog.Vhost) bool { return r.Name == name }) {
			gone = append(gone, catalog.Del(catalog.Vhost{Name: name}))
			continue
		}
		vhosts = append(vhosts, v)
	}
	return gone, vhosts
}
