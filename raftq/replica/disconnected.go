package replica

import (
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// RabbitMQ 4.3 keeps the messages a consumer holds for a while when the
// consumer's node is cut off from the queue's leader (rabbit_fifo's
// suspected_down consumers and their consumer_disconnected_timeout):
// the node may be back, its channel alive, and acknowledge them; after
// the timeout they return to the queue. A node that comes back restarted,
// or that left the cluster, has lost its channels: what they held returns
// at once. Warren does the same wherever a consumer's link to the leader
// is lost rather than closed:
//
//   - a remote consumer's stream breaks (forward.Server.Consume): the
//     consumer is detached and keeps its messages until it attaches again
//     under its ID, or the timeout passes;
//   - a new leader's predecessor's consumers do not follow it
//     (consumerTable.reap): they are declared down after the timeout, not
//     OrphanGrace, if it is longer;
//   - gossip reports a node failed (NodeGone): its cancelled consumers'
//     and getters' messages return after the timeout, if the node is not
//     back by then.
//
// The timeout is the runtime's, measured with the leader's clock; the
// returning is a command in the log as any return.

// DefaultDisconnectedTimeout is RabbitMQ 4.3's consumer_disconnected_timeout
// default (rabbit_quorum_queue:get_consumer_disconnected_timeout/1).
const DefaultDisconnectedTimeout = time.Minute

// DisconnectedTimeoutOf reads a queue's consumer disconnected timeout from
// its effective arguments (x-consumer-disconnected-timeout, in
// milliseconds, already combined with the consumer-disconnected-timeout
// policy, the lower winning): def when they do not set one.
func DisconnectedTimeoutOf(args wire.Table, def time.Duration) time.Duration {
	if n, ok := wire.IntValue(args["x-consumer-disconnected-timeout"]); ok && n >= 0 {
		return time.Duration(n) * time.Millisecond
	}
	return def
}

// DisconnectedTimeout is how long the messages of a consumer cut off from
// this queue's leader wait for it (Config.DisconnectedTimeout).
func (c *core) DisconnectedTimeout() time.Duration {
	if c.cfg.DisconnectedTimeout == nil {
		return 0
	}
	return max(c.cfg.DisconnectedTimeout(), 0)
}

// Disconnect takes c away, whose link to this leader broke, unless the
// machine keeps it in its place: an exclusive or single active consumer
// stays attached in the machine, suspended (raftq.OpSuspend), as RabbitMQ
// 4.3 keeps a suspected-down consumer active and hands it nothing, so
// that nobody takes its place while it may come back (a single active
// consumer's successor would otherwise take later messages ahead of the
// ones it held). Its handle here goes, as with a predecessor's consumer at
// a new leader (consumerTable.reap). Others are detached (Cancel). It reports
// whether c was kept; a kept consumer that does not attach again must be
// declared down (SettleOwned with its ID), which returns what it holds
// and lets the next consumer take its place.
func (r *Replica) Disconnect(c queue.Consumer) (kept bool) {
	id, ref, ok := r.consumers.lookup(c)
	if !ok {
		return false
	}
	r.fsm.mu.Lock()
	keeps := r.fsm.m.Keeps(id)
	suspends := r.fsm.m.Suspends()
	r.fsm.mu.Unlock()
	if !keeps || ref == nil || ref.noAck {
		r.Cancel(c)
		return false
	}
	// Under attachMu, so that the consumer attaching again (Consume,
	// which finds its ID free once forgotten) follows the suspend in the
	// log, and clears it. A queue still at machine version 1 (a member's
	// node on an older build) is not asked to suspend: that build would
	// stop on the command. The consumer stays in its place, and what it
	// is handed meanwhile waits for it, as before suspensions.
	r.consumers.attachMu.Lock()
	r.consumers.forget(c)
	if suspends {
		r.propose(&raftq.Command{Op: raftq.OpSuspend, Consumer: id})
	}
	r.consumers.attachMu.Unlock()
	return true
}

// Suspended reports whether the consumer with this ID is kept in its
// place, suspended (Disconnect).
func (c *core) Suspended(consumer uint64) bool {
	c.fsm.mu.Lock()
	defer c.fsm.mu.Unlock()
	return c.fsm.m.Suspended(raftq.ConsumerID(consumer))
}

// Attached reports whether the consumer with this ID is attached through
// this member: one that was disconnected came back.
func (r *Replica) Attached(consumer uint64) bool {
	return r.consumers.attached(raftq.ConsumerID(consumer))
}
