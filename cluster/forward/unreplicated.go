package forward

import (
	"context"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// An in-memory queue (exclusive, auto-delete or transient) lives on the
// node that declared it, as in RabbitMQ, and every other node reaches it
// as a group of one member that always leads: the same Router forwards
// their publishes, consumers, gets and settlements to it, and the Server
// serves them from the queue itself through Unreplicated.

// Unreplicated presents a queue that is not a Raft group, on node, as
// the Server's Local: it leads, always, and settles by delivery ID.
func Unreplicated(q queue.Queue, node string) Local { return unreplicated{q, node} }

type unreplicated struct {
	queue.Queue
	node string
}

// EnqueueAs stores m; the publisher's sequence is for a replicated log's
// duplicate detection, which a queue in memory does not have: a publish
// sent again after a broken stream may be stored twice, as RabbitMQ's
// classic queues may.
func (u unreplicated) EnqueueAs(ctx context.Context, m *queue.Message, _, _ uint64, done func(error)) error {
	return u.Queue.Enqueue(ctx, m, done)
}

func (u unreplicated) IsLeader() bool { return true }
func (u unreplicated) Leader() string { return u.node }

// Reconfigure is the owner node's broker's business: it applies policies
// to its own queues.
func (u unreplicated) Reconfigure(wire.Table) error { return ErrReconfigureUnsupported }

// SettleHeld and Deliveries are about deliveries of an earlier leader,
// which an in-memory queue never has.
func (u unreplicated) SettleHeld([]replica.HeldSettlement) error { return nil }
func (u unreplicated) Deliveries(uint64) []uint64                { return nil }

func (u unreplicated) GetAs(_ uint64, noAck bool) (queue.Delivery, uint32, bool, error) {
	return u.Queue.Get(noAck)
}

// SettleOwned settles by delivery ID: the queue knows who holds each.
func (u unreplicated) SettleOwned(list []replica.OwnedSettlement) error {
	for _, s := range list {
		ids := []uint64{s.Delivery}
		switch s.Op {
		case raftq.OpSettle:
			u.Settle(ids)
		case raftq.OpReturn:
			u.Requeue(ids, s.Cause)
		case raftq.OpDiscard:
			u.Discard(ids, s.Cause)
		}
	}
	return nil
}

func (u unreplicated) Knows([]uint64) bool { return true }

// DisconnectedTimeout is zero: RabbitMQ's classic queues return a lost
// consumer's messages at once.
func (u unreplicated) DisconnectedTimeout() time.Duration { return 0 }

func (u unreplicated) Disconnect(c queue.Consumer) bool { u.Cancel(c); return false }
func (u unreplicated) Attached(uint64) bool             { return false }
func (u unreplicated) Suspended(uint64) bool            { return false }
