package node

import (
	"time"

	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// Another node's in-memory queue (exclusive, auto-delete, transient) is
// reached as a group of one member that always leads: a router on every
// other node, the owner node's forward service serving it from the
// broker (broker/remote.go has the whole story).

// Boot implements broker.Cluster.
func (c *clusterNode) Boot() string { return c.boot }

// OpenRemote implements broker.Cluster.
func (c *clusterNode) OpenRemote(rec catalog.Queue, name string) (queue.Queue, error) {
	return forward.NewRouter(forward.RouterConfig{
		QueueID: rec.ID, Name: name, Members: rec.Members,
		Self: c.self, SelfBoot: replica.BootOf(c.self, c.boot),
		Addr: c.addrOf, Pool: c.pool, PublishTimeout: c.cfg.PublishTimeout,
		Log: c.log, Gone: c.ownerGone(rec), Leader: rec.Members[0],
	}), nil
}

// ownerGone reports, for another node's in-memory queue, whether gossip
// sees its node failed, gone or started again (a new start holds none of
// the queue's messages): the node's publishes to it are nacked at once
// rather than after the publish timeout, until the queue's removal
// (dropTransientOf) or the node's return.
func (c *clusterNode) ownerGone(rec catalog.Queue) func() error {
	if len(rec.Members) != 1 || c.gossip == nil {
		return nil
	}
	owner, boot := rec.Members[0], rec.Boot
	return func() error {
		m, ok := c.gossip.Member(owner)
		switch {
		case !ok:
			return nil // not heard of yet: a node still joining
		case m.State == membership.Dead || m.State == membership.Left:
			return &queue.NodeDownError{Node: owner, Why: "is " + m.State.String()}
		case boot != "" && m.Boot != "" && m.Boot != boot:
			return &queue.NodeDownError{Node: owner, Why: "has started again"}
		}
		return nil
	}
}

// servedQueue is the forward service's lookup for this node's in-memory
// queues.
func (c *clusterNode) servedQueue(id string) (forward.Local, bool) {
	b := c.model.Load()
	if b == nil {
		return nil, false
	}
	q, ok := b.ServedQueue(id)
	if !ok {
		return nil, false
	}
	return forward.Unreplicated(q, c.self), true
}

// transientGrace is how long a node that gossip reports failed must stay
// so before the others remove its transient queues: a node that was only
// slow to answer keeps them.
const transientGrace = 10 * time.Second

// dropTransientOf removes, on a node's failure or departure, the records
// of the transient queues its start boot declared: their messages were
// in its memory. Every node that sees it does so; the removals name each
// queue's ID, so a second one, or one after the name is declared again,
// changes nothing.
func (c *clusterNode) dropTransientOf(ev membership.Event) {
	node, boot := ev.Member.Name, ev.Member.Boot
	if boot == "" {
		return
	}
	wait := transientGrace
	if ev.Kind == membership.Departed {
		wait = 0
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-c.stop:
			return
		case <-time.After(wait):
		}
		if m, ok := c.gossip.Member(node); ok && m.Boot == boot && m.State == membership.Alive {
			return // back: it was not gone
		}
		if b := c.model.Load(); b != nil {
			b.DropTransientOf(node, boot)
		}
	}()
}
