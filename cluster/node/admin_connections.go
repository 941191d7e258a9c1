package node

import (
	"path/filepath"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
)

// connectionAdmin answers for this node's client connections and its
// status.
type connectionAdmin struct {
	c *clusterNode
	b *broker.Broker
	n *Node
}

func (a connectionAdmin) NodeStatus() admin.NodeStatus {
	dir, err := filepath.Abs(a.n.cfg.DataDir)
	if err != nil {
		dir = a.n.cfg.DataDir
	}
	payloads := a.n.cfg.Broker.Replica.Payloads
	st := admin.NodeStatus{Started: a.n.started, DataDir: dir, AMQPListen: a.n.AMQPAddr().String(), Running: a.c.ready(a.b),
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
