package node

import (
	"time"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// QueueMetrics is what this node's metrics say of one queue
// (cluster/exporter). Like RabbitMQ's, a queue's counts come from the node
// that hosts it (leads it, for a quorum queue), so that summing over
// nodes counts each queue once; every node with a replica reports its
// Raft view.
type QueueMetrics struct {
	Vhost, Name, Type string
	// Hosted: this node leads the queue (holds it, for a classic queue;
	// led it when it went to sleep, for a hibernating quorum queue), and
	// Stats are its counts.
	Hosted bool
	Stats  queue.Stats
	// Raft is this node's replica's view of the queue's group, if it
	// holds an open one.
	Raft *replica.MemberStatus
	// CommitLatency is, for a replica that leads, how long its last own
	// entry took from append to apply; zero if none yet.
	CommitLatency time.Duration
}

// QueueMetrics lists every queue this node hosts or holds a replica of.
// It asks no other node: counts come from the local replica or queue.
func (n *Node) QueueMetrics() []QueueMetrics {
	var out []QueueMetrics
	for _, q := range n.broker.Queues("") {
		m := QueueMetrics{Vhost: q.Record.Vhost, Name: q.Record.Name, Type: q.Record.Type}
		var r *replica.Replica
		var asleep *sleeper
		if n.cluster != nil && q.Record.Type == broker.QueueTypeQuorum {
			r, asleep = n.cluster.host.member(q.Record.ID)
		}
		switch {
		case r != nil:
			st := r.Status()
			m.Raft = &st
			m.Hosted = st.State == "Leader"
			if d, ok := r.CommitLatency(); ok {
				m.CommitLatency = d
			}
		case asleep != nil:
			// A hibernating queue is empty and unused: its counts are
			// zero, and no replica runs to ask.
			m.Hosted = asleep.leader == n.cluster.self
		case n.cluster != nil && q.Record.Type == broker.QueueTypeQuorum:
			// A member elsewhere: its leader's node reports it.
		default:
			m.Hosted = n.cluster == nil || n.queueLeader(q.Engine) == n.cluster.self
		}
		if m.Hosted && asleep == nil {
			m.Stats = q.Engine.Stats()
		}
		if m.Hosted || m.Raft != nil {
			out = append(out, m)
		}
	}
	return out
}

// queueLeader names the node that holds queue engine e: the leader its
// router knows (a quorum queue's, or the one node of a cluster's classic
// queue), else this node (an in-memory queue of its own).
func (n *Node) queueLeader(e queue.Queue) string {
	if l, ok := e.(interface{ Leader() string }); ok {
		return l.Leader()
	}
	return n.Name()
}

// MessageCounters are the node's AMQP message and connection totals.
func (n *Node) MessageCounters() server.Counters { return n.server.Counters() }

// ClusterName is the name the node gives its cluster in AMQP's server
// properties.
func (n *Node) ClusterName() string { return n.server.ClusterName() }

// LogSyncs is how many times the node's write-ahead log, which holds
// every local quorum queue replica's Raft log, has synced to disk
// (fdatasync) since the node started; ok is false without one.
func (n *Node) LogSyncs() (syncs uint64, ok bool) {
	if n.cluster == nil {
		if n.qlog == nil {
			return 0, false
		}
		return n.qlog.Commits(), true // a standalone node's own
	}
	if n.cluster.qlog == nil {
		return 0, false
	}
	return n.cluster.qlog.Commits(), true
}
