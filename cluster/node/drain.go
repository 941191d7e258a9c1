package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/raftq/replica"
)

// Maintenance mode (warrenctl drain), this node's part. The drained state
// is a metadata.Node record in the replicated store (broker/nodes.go), so
// every node's placement leaves a drained node out (PlacementNodes). The
// drained node itself carries the state out, each time the admin service
// asks (MemberMaintenance, right after the commit) and every
// maintainInterval (after a restart, or for a replica opened later):
//   - its AMQP listener is suspended and its client connections closed
//     with 320 CONNECTION_FORCED (server.Suspend), as RabbitMQ's
//     maintenance mode does, so clients reconnect to other nodes;
//   - its replicas' heartbeat and election timeouts are raised while they
//     follow, so that they do not start elections (replica.SetDrained,
//     which says why Warren raises timeouts rather than demoting voters:
//     the queues' fault tolerance stays the same during maintenance);
//   - the admin service moves every leadership off it (admin/drain.go).
// Undrain reverses the first two; leaderships come back by rebalancing.

// maintainInterval is how often a node checks its maintenance state (a
// variable for a test that needs a drain recorded but not yet carried
// out).
var maintainInterval = time.Second

// drained reports whether node is recorded as drained.
func (c *clusterNode) drained(node string) bool {
	b := c.model.Load()
	return b != nil && b.Draining(node)
}

// maintain carries out this node's recorded maintenance state and returns
// it, with the number of client connections it closed.
func (n *Node) maintain(ctx context.Context) (bool, int, error) {
	c := n.cluster
	draining := c.drained(c.self)
	for _, r := range c.host.all() {
		r.SetDrained(draining)
	}
	closed := 0
	switch {
	case draining && (!n.server.Suspended() || n.server.ConnectionCount() > 0):
		var err error
		if closed, err = n.server.Suspend(ctx); err != nil {
			return draining, closed, fmt.Errorf("close client connections: %w", err)
		}
	case !draining && n.server.Suspended():
		n.server.Resume()
	}
	return draining, closed, nil
}

// drainChanged keeps this node's queue members out of elections (or lets
// them back in) as soon as its model learns that it is drained (or no
// longer): a node that restarts drained opens its members from the model
// it held when it stopped, which may predate the drain, and one of them
// could win an election before the maintenance loop's next turn. The
// rest (leaderships, client connections) is that loop's.
func (c *clusterNode) drainChanged(node string, draining bool) {
	if node != c.self {
		return
	}
	for _, r := range c.host.all() {
		r.SetDrained(draining)
	}
}

// watchMaintenance runs maintain every maintainInterval until the node
// stops.
func (n *Node) watchMaintenance() {
	c := n.cluster
	defer c.wg.Done()
	t := time.NewTicker(maintainInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		draining, _, err := n.maintain(ctx)
		if err != nil {
			c.log.Warn("maintenance mode", "err", err)
		}
		cancel()
		if draining {
			n.handOffDrained()
		}
		c.upgradeMachines() // machines.go
	}
}

// startMaintenance starts watchMaintenance; Start calls it once the AMQP
// server exists.
func (n *Node) startMaintenance() {
	n.cluster.wg.Add(1)
	go n.watchMaintenance()
}

// The admin service's MaintenanceBackend.

// maintenanceAdmin records and carries out maintenance mode, and
// forgets removed nodes.
type maintenanceAdmin struct {
	c *clusterNode
	b *broker.Broker
	n *Node
}

func (a maintenanceAdmin) SetDraining(node string, draining bool) error {
	return a.b.SetDraining(node, draining)
}

// Maintain waits (within ctx) until this node's copy of the metadata has
// the state the caller committed, then carries it out.
func (a maintenanceAdmin) Maintain(ctx context.Context, draining bool) (bool, int, error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for a.c.drained(a.c.self) != draining {
		select {
		case <-ctx.Done():
			return !draining, 0, fmt.Errorf("this node's metadata does not show the change yet: %w", ctx.Err())
		case <-t.C:
		}
	}
	return a.n.maintain(ctx)
}

func (a maintenanceAdmin) ForgetServer(_ context.Context, node string) error {
	if err := a.c.meta.RemoveServer(node); err != nil {
		return err
	}
	if a.b.Draining(node) {
		return a.b.SetDraining(node, false) // its record goes with it
	}
	return nil
}

// handOffDrained hands off the leadership of any group a drained node's
// replica leads: one that had to elect it (no other member could win) or
// that a transfer named, to a member on a node that is not drained. Each
// tries for handOffTimeout; the drain loop tries again on its next round.
func (n *Node) handOffDrained() {
	c := n.cluster
	leading := c.host.leading()
	for _, r := range leading {
		ctx, cancel := context.WithTimeout(context.Background(), handOffTimeout)
		if err := c.handOffUndrained(ctx, r, false); err != nil && !errors.Is(err, replica.ErrNoTarget) {
			c.log.Warn("drained: queue leadership not handed off", "queue", r.Name(), "err", err)
		}
		cancel()
		r.SetDrained(true) // a follower now: raise its timeouts
	}
}
