package replica

import (
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// consumerTable is the consumers attached through this member, which a
// leader delivers to, and the acknowledgements it collects for the
// settler; mu guards both, so that a leader that stops leading takes the
// consumers and what they acknowledged at once (onFollowing). It also
// keeps a new leader's predecessor's consumers that have yet to attach
// again (orphans, former.go).
type consumerTable struct {
	r *Replica

	// foreignGets counts the forwarded gets (GetAs with another node's
	// getter) proposed and not yet answered (owned.go's releasesPending).
	foreignGets atomic.Int32

	mu       sync.Mutex
	byID     map[raftq.ConsumerID]*consumerRef
	byHandle map[queue.Consumer]raftq.ConsumerID
	// attachMu orders a consumer attaching under its own ID
	// (ConsumeOptions.ID) with a new leader detaching or suspending its
	// predecessor's consumers (former.go), and with the suspend of one
	// whose link broke (Disconnect): those must not follow the attach.
	attachMu sync.Mutex
	// orphans are the consumers reapConsumers detached and will declare
	// down after OrphanGrace unless they attach here again meanwhile.
	orphans *orphanSet
	// toSettle collects acknowledged deliveries (and deliveries to no-ack
	// consumers), which the settler goroutine proposes in batches.
	toSettle map[raftq.ConsumerID][]uint64
	// orphansDetached: leading, and the consumers of the previous leader
	// are detached in the log (former.go).
	orphansDetached atomic.Bool
}

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
	r.consumers.mu.Lock()
	defer r.consumers.mu.Unlock()
	for i, v := range views {
		out[i].ConsumerView = v
		ref := r.consumers.byID[v.ID]
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

func (t *consumerTable) forget(c queue.Consumer) raftq.ConsumerID {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.byHandle[c]
	if !ok {
		return 0
	}
	delete(t.byHandle, c)
	delete(t.byID, id)
	return id
}

// markAttached records that consumer's attach, proposed here, is applied.
func (t *consumerTable) markAttached(consumer raftq.ConsumerID) {
	t.mu.Lock()
	if ref := t.byID[consumer]; ref != nil {
		ref.attached = true
	}
	t.mu.Unlock()
}

func (t *consumerTable) deliver(e raftq.Effect) {
	t.mu.Lock()
	ref := t.byID[e.Consumer]
	if ref != nil && !ref.attached {
		ref = nil // an earlier leader's delivery
	}
	var id uint64
	if ref != nil {
		if ref.noAck {
			t.toSettle[e.Consumer] = append(t.toSettle[e.Consumer], e.Index)
		} else {
			id = e.Delivery
		}
	}
	t.mu.Unlock()
	if ref == nil {
		return // its channel is going (ConsumerDown follows), or an earlier leader's delivery
	}
	msg, err := t.r.storage.readMessage(e.Index)
	if err != nil {
		t.r.log.Error("read message for delivery", "index", e.Index, "err", err)
		return
	}
	ref.c.Deliver(queue.Delivery{ID: id, Message: withCounts(msg, e), Redelivered: e.Redelivered})
	if ref.noAck {
		t.r.settler.wakeUp()
	}
}

// timedOut handles a consumer timeout: the timed-out messages are
// back in the queue and the machine detached the consumer; the channel
// tells the client (basic.cancel, or a 406 channel error). A basic.get
// delivery that timed out has no consumer to tell: the getter is shared
// by every channel, so its message just returns.
func (t *consumerTable) timedOut(e raftq.Effect) {
	t.mu.Lock()
	ref := t.byID[e.Consumer]
	if ref != nil {
		delete(t.byID, e.Consumer)
		delete(t.byHandle, ref.c)
	}
	t.mu.Unlock()
	if ref != nil {
		go ref.c.TimedOut(ref.timeout)
	}
}
