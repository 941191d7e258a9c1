package replica

import (
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// ConsumerInfo is one of the queue's consumer records as its leader sees
// it (warrenctl quorum consumers): the machine's view, and what the leader
// knows of the consumer that attached through it.
type ConsumerInfo struct {
	raftq.ConsumerView
	// Attached here: Tag, Origin and AckRequired are known. A consumer
	// record the leader has no attachment for is cancelled, a basic.get
	// owner, or one that attached through an earlier leader and has not
	// come back yet.
	Here bool
	Tag  string
	// Origin is the node whose channel consumes; "" for this node.
	Origin      string
	AckRequired bool
}

// Consumers lists the queue's consumer records, by ID. Only the leader
// knows who attached: a member that does not lead answers ErrNotLeader.
func (r *Replica) Consumers() ([]ConsumerInfo, error) {
	r.awaitApplied(statsWait)
	if !r.isLeader() {
		return nil, ErrNotLeader
	}
	r.fsm.mu.Lock()
	views := r.fsm.m.AppendConsumers(nil)
	r.fsm.mu.Unlock()
	out := make([]ConsumerInfo, len(views))
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, v := range views {
		out[i].ConsumerView = v
		ref := r.consumers[v.ID]
		if ref == nil {
			continue
		}
		out[i].Here, out[i].Tag, out[i].AckRequired = true, ref.tag, !ref.noAck
		if o, ok := ref.c.(queue.Origin); ok {
			out[i].Origin = o.Origin()
		}
	}
	return out, nil
}
