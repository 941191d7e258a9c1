package replica

import (
	"time"

	"github.com/warrenmq/warren/amqp"
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
//     (reapConsumers): they are declared down after the timeout, not
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
func DisconnectedTimeoutOf(args amqp.Table, def time.Duration) time.Duration {
	if n, ok := amqp.IntValue(args["x-consumer-disconnected-timeout"]); ok && n >= 0 {
		return time.Duration(n) * time.Millisecond
	}
	return def
}

// DisconnectedTimeout is how long the messages of a consumer cut off from
// this queue's leader wait for it (Config.DisconnectedTimeout).
func (r *Replica) DisconnectedTimeout() time.Duration {
	if r.cfg.DisconnectedTimeout == nil {
		return 0
	}
	return max(r.cfg.DisconnectedTimeout(), 0)
}
