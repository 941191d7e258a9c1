package node

import (
	"context"
	"time"
	"weak"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/proto/memberpb"
	"github.com/warrenmq/warren/raftq/replica"
)

// RemoveFromGroupOnly takes node out of quorum queue name's Raft group and
// leaves the queue's record as it was: a DeleteMember interrupted between
// its steps 2 and 3.
func (n *Node) RemoveFromGroupOnly(vhost, name, node string) error {
	rec, err := quorumRecord(n.broker, vhost, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = n.cluster.members.change(ctx, rec.ID, rec.Members, memberpb.ChangeOp_REMOVE_SERVER, node, "")
	return err
}

// Groups counts this node's queue replicas: open, and closed while their
// group hibernates.
func (n *Node) Groups() (open, asleep int) {
	c := n.cluster
	rs, sleeping := c.host.members()
	return len(rs), len(sleeping)
}

// QueueLeads reports whether this node's replica of quorum queue name
// leads its group now.
func (n *Node) QueueLeads(vhost, name string) bool {
	rec, err := quorumRecord(n.broker, vhost, name)
	if err != nil {
		return false
	}
	r, ok := n.cluster.host.get(rec.ID)
	return ok && r.IsLeader()
}

// WeakReplicas are weak pointers to this node's open replicas: a test
// sees whether a closed one can still be reached.
func (n *Node) WeakReplicas() []weak.Pointer[replica.Replica] {
	c := n.cluster
	var out []weak.Pointer[replica.Replica]
	for _, r := range c.host.byID() {
		out = append(out, weak.Make(r))
	}
	return out
}

// SetMaintainInterval sets how often nodes started from now on carry out
// their maintenance state, and returns what puts it back.
func SetMaintainInterval(d time.Duration) (restore func()) {
	was := maintainInterval
	maintainInterval = d
	return func() { maintainInterval = was }
}

// RecordDraining commits node's drained state to the metadata and does
// nothing more: the drained node's leaderships stay until its maintenance
// loop's next turn (the admin service's drain moves them at once).
func (n *Node) RecordDraining(node string, draining bool) error {
	return n.broker.SetDraining(node, draining)
}

// SeesDraining reports whether this node's copy of the metadata has node
// drained.
func (n *Node) SeesDraining(node string) bool { return n.cluster.drained(node) }

// QueueMemberDrained reports whether this node's member of quorum queue
// name is kept out of elections (replica.SetDrained).
func (n *Node) QueueMemberDrained(vhost, name string) bool {
	r, _, ok := n.localReplica(vhost, name)
	return ok && r.Drained()
}

// CloseConnections closes the connections f selects, as an operator's
// close connection(s) command does on this node.
func (n *Node) CloseConnections(f server.ConnectionFilter, reason string) []server.ClosedConnection {
	return connectionAdmin{n: n}.CloseConnections(f, reason)
}
