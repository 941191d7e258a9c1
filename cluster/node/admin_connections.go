package node

import (
	"path/filepath"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
)

// connectionAdmin answers for this node's client connections and its
// status, a cluster member's (c set) or a standalone node's.
type connectionAdmin struct {
	c *clusterNode // nil on a standalone node
	b *broker.Broker
	n *Node
}

// running reports whether the node serves clients: a standalone node
// always, a member once it is ready.
func (a connectionAdmin) running() bool { return a.c == nil || a.c.ready(a.b) }

func (a connectionAdmin) NodeStatus() admin.NodeStatus {
	dir, err := filepath.Abs(a.n.cfg.DataDir)
	if err != nil {
		dir = a.n.cfg.DataDir
	}
	payloads := a.n.cfg.Broker.Replica.Payloads
	st := admin.NodeStatus{Started: a.n.started, DataDir: dir, AMQPListen: a.n.AMQPAddr().String(), Running: a.running(),
		PayloadCache: payloads.Used(), PayloadCacheLimit: payloads.Limit()}
	for _, c := range a.n.Connections() {
		st.Connections++
		st.Channels += len(c.Channels)
	}
	return st
}

func (a connectionAdmin) Connections() []server.ConnectionInfo { return a.n.Connections() }

func (a connectionAdmin) CloseConnections(f server.ConnectionFilter, reason string) []server.ClosedConnection {
	closed := a.n.server.CloseMatching(f, wire.Errorf(wire.ConnectionForced, "%s", reason))
	for _, c := range closed {
		a.n.log.Info("closed a client connection by an operator's request", "connection", c.Name, "user", c.User, "vhost", c.Vhost, "reason", reason)
	}
	return closed
}
