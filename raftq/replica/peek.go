package replica

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// ErrNoMessageAtPosition: fewer messages are ready than the position
// asked of Peek.
var ErrNoMessageAtPosition = errors.New("replica: no message at that position")

// Peek returns the message at position pos (1 for the next to be handed
// out) among the ready ones, leaving it where it is, with the
// x-delivery-count it would be delivered with (always set, as
// rabbitmq-queues peek shows it). Only the leader answers, as in
// RabbitMQ, whose peek asks the leader: a follower may not have applied
// the latest entries.
func (r *Replica) Peek(pos int) (*queue.Message, error) {
	if pos < 1 {
		return nil, fmt.Errorf("position %d: %w", pos, ErrNoMessageAtPosition)
	}
	r.awaitApplied(statsWait)
	if !r.isLeader() {
		return nil, ErrNotLeader
	}
	r.fsm.mu.Lock()
	p, ok := r.fsm.m.Peek(pos)
	r.fsm.mu.Unlock()
	if !ok {
		return nil, ErrNoMessageAtPosition
	}
	// Not readMessage: the recent-message cache gives a payload up once
	// read, and this message has not been delivered.
	var l raft.Log
	if err := r.storage.store.GetLog(p.Index, &l); err != nil {
		// Taken, settled and compacted away since the look above.
		return nil, fmt.Errorf("log entry %d: %w", p.Index, ErrNoMessageAtPosition)
	}
	m, err := decodeEntryMessage(l.Data)
	if err != nil {
		return nil, fmt.Errorf("log entry %d: %w", p.Index, err)
	}
	m = withCounts(m, raftq.Effect{DeliveryCount: p.DeliveryCount, AcquiredCount: p.AcquiredCount})
	if p.DeliveryCount == 0 {
		// A delivery would not carry it; peek shows it, as RabbitMQ's
		// does. The message was decoded for this call: its own headers.
		if m.Properties.Headers == nil {
			m.Properties.Headers = wire.Table{}
		}
		m.Properties.Headers["x-delivery-count"] = int64(0)
	}
	return m, nil
}
