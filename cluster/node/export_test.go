package node

import (
	"context"
	"time"
	"weak"

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
	_, err = n.cluster.change(ctx, rec.ID, rec.Members, memberpb.ChangeOp_REMOVE_SERVER, node, "")
	return err
}

// Groups counts this node's queue replicas: open, and closed while their
// group hibernates.
func (n *Node) Groups() (open, asleep int) {
	c := n.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.replicas), len(c.asleep)
}

// QueueLeads reports whether this node's replica of quorum queue name
// leads its group now.
func (n *Node) QueueLeads(vhost, name string) bool {
	rec, err := quorumRecord(n.broker, vhost, name)
	if err != nil {
		return false
	}
	r, ok := n.cluster.replica(rec.ID)
	return ok && r.IsLeader()
}

// WeakReplicas are weak pointers to this node's open replicas: a test
// sees whether a closed one can still be reached.
func (n *Node) WeakReplicas() []weak.Pointer[replica.Replica] {
	c := n.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []weak.Pointer[replica.Replica]
	for _, r := range c.replicas {
		out = append(out, weak.Make(r))
	}
	return out
}
