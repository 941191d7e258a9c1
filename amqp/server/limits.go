package server

import (
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
)

// Client limits checked as connections and channels open: the node's own
// (Config.ConnectionMax, ChannelMaxPerNode: RabbitMQ's connection_max and
// channel_max_per_node), a vhost's and a user's (broker/limits.go),
// counted across the cluster.

// ClientCount is how many client connections, and channels on them, are
// a vhost's or a user's (whichever is set).
type ClientCount struct{ Connections, Channels int }

// SetClientCounter sets how the server counts a vhost's or a user's
// clients across the cluster, for vhost and user limits; without one, it
// counts its own.
func (s *Server) SetClientCounter(count func(vhost, user string) ClientCount) {
	s.mu.Lock()
	s.countAll = count
	s.mu.Unlock()
}

// countClients counts the clients of vhost, of user, or all (empty
// both): on this server if local or no counter is set, else across the
// cluster. Only what has a limit is counted, at connection.open and
// channel.open.
func (s *Server) countClients(vhost, user string, local bool) ClientCount {
	s.mu.Lock()
	count := s.countAll
	s.mu.Unlock()
	if count != nil && !local {
		return count(vhost, user)
	}
	var n ClientCount
	for _, c := range s.connSet() {
		id := c.ident.Load()
		if id == nil || (vhost != "" && id.vhost != vhost) || (user != "" && id.user != user) {
			continue // in its handshake, or another's
		}
		n.Connections++
		c.chMu.Lock()
		n.Channels += len(c.channels)
		c.chMu.Unlock()
	}
	return n
}

// checkConnectionLimits refuses the connection if the node, its vhost or
// its user has as many connections as its limit allows (the vhost's and
// user's counted across the cluster), with RabbitMQ's texts, in
// rabbit_reader's order.
func (c *conn) checkConnectionLimits(v *broker.Vhost) *wire.Error {
	if limit := c.s.cfg.ConnectionMax; limit > 0 && c.s.countClients("", "", true).Connections >= limit {
		return wire.Errorf(wire.NotAllowed, "connection refused: node connection limit (%d) is reached", limit)
	}
	if limit, ok := v.Limit(broker.LimitMaxConnections); ok && int64(c.s.countClients(v.Name(), "", false).Connections) >= limit {
		return wire.Errorf(wire.NotAllowed, "access to vhost '%s' refused for user '%s': connection limit (%d) is reached", v.Name(), c.user.Name, limit)
	}
	if limit, ok := c.s.broker.UserLimit(c.user.Name, broker.LimitMaxConnections); ok && int64(c.s.countClients("", c.user.Name, false).Connections) >= limit {
		return wire.Errorf(wire.NotAllowed, "connection refused for user '%s': user connection limit (%d) is reached", c.user.Name, limit)
	}
	return nil
}

// checkChannelLimits refuses one channel more than the user's limit
// (counted across the cluster) or the node's allows, with RabbitMQ's
// texts: a connection error, as there.
func (c *conn) checkChannelLimits() *wire.Error {
	if limit, ok := c.s.broker.UserLimit(c.user.Name, broker.LimitMaxChannels); ok && int64(c.s.countClients("", c.user.Name, false).Channels) >= limit {
		return wire.Errorf(wire.NotAllowed, "number of channels opened for user '%s' has reached the maximum allowed user limit of %d", c.user.Name, limit)
	}
	if limit := c.s.cfg.ChannelMaxPerNode; limit > 0 && c.s.countClients("", "", true).Channels >= limit {
		return wire.Errorf(wire.NotAllowed, "number of channels opened on node '%s' has reached the maximum allowed limit of %d", c.s.broker.NodeID(), limit)
	}
	return nil
}
