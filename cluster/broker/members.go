package broker

import (
	"fmt"
	"slices"

	"github.com/warrenmq/warren/cluster/catalog"
)

// This file keeps a replicated queue's record in step with its Raft
// group's membership (cluster/node's membership.go changes the group; the
// record tells every node which members to run).

// MembersChanger is a replicated queue's engine that can follow a change
// of the queue's members: open this node's replica when the node became
// a member, remove it when it stopped being one, and route to the new
// members. The broker calls it in record order, never with its locks
// held.
type MembersChanger interface {
	MembersChanged(members []string)
}

// SetQueueMembers commits the new members of queue name in vhost (and the
// member that bootstraps the group should it ever be created again; it
// must be one of them) to the metadata, and applies them on this node.
// id is the queue's ID as the caller read it: a queue deleted and
// declared again meanwhile is not touched.
func (b *Broker) SetQueueMembers(vhost, name, id string, members []string, leader string) error {
	v := b.vhost(vhost)
	if v == nil {
		return fmt.Errorf("no vhost %q", vhost)
	}
	v.mu.Lock()
	q, ok := v.queues[name]
	if !ok || q.rec.ID != id {
		v.mu.Unlock()
		return fmt.Errorf("queue %q in vhost %q is gone", name, vhost)
	}
	rec := q.rec
	rec.Vhost = vhost
	rec.Members, rec.Leader = slices.Clone(members), leader
	if err := b.store.Apply(catalog.Put(rec)); err != nil {
		v.mu.Unlock()
		return fmt.Errorf("store queue members: %w", err)
	}
	v.mu.Unlock()
	// Changes this node commits do not come back through applyUpdate:
	// apply it here, as every other node does.
	v.applyMembers(q, rec)
	return nil
}

// applyMembers makes rec, the same queue's record with other members, q's
// record, and tells q's engine when its members changed.
func (qt *queueTable) applyMembers(q *Queue, rec catalog.Queue) {
	qt.v.mu.Lock()
	if qt.queues[q.rec.Name] != q {
		qt.v.mu.Unlock()
		return
	}
	changed := !slices.Equal(q.rec.Members, rec.Members)
	q.rec.Members, q.rec.Leader = rec.Members, rec.Leader
	qt.v.mu.Unlock()
	if mc, ok := q.engine.(MembersChanger); ok && changed {
		mc.MembersChanged(rec.Members)
	}
}
