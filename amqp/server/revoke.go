package server

import "github.com/warrenmq/warren/amqp/wire"

// ConnectionFilter selects client connections; an empty field matches any.
type ConnectionFilter struct {
	// Name is the connection's name as listings show it ("client address
	// -> server address").
	Name, User, Vhost string
	// Limit bounds how many match; 0 is no bound.
	Limit int
}

// ClosedConnection is a connection CloseMatching closed.
type ClosedConnection struct{ Name, User, Vhost string }

// CloseConnections closes, with 320 CONNECTION_FORCED ("broker forced
// connection closure with reason '...'", as RabbitMQ words it), the open
// connections of user in vhost (an empty user or vhost matches any), as
// RabbitMQ closes a deleted user's and a deleted vhost's connections. It
// does not wait for them to go, and returns how many it closed.
func (s *Server) CloseConnections(user, vhost, reason string) int {
	closed := s.CloseMatching(ConnectionFilter{User: user, Vhost: vhost},
		wire.Errorf(wire.ConnectionForced, "broker forced connection closure with reason '%s'", reason))
	if len(closed) > 0 {
		s.log.Info("closed client connections", "reason", reason, "connections", len(closed))
	}
	return len(closed)
}

// CloseMatching closes the open connections f selects with e, oldest
// first, and returns them. It does not wait for them to go. Connections
// still in their handshake are left alone: they have no user or vhost
// yet, and cannot open one that is gone; so are those already closing.
func (s *Server) CloseMatching(f ConnectionFilter, e *wire.Error) []ClosedConnection {
	var match []*conn
	for _, c := range s.openConns() {
		id := c.ident.Load()
		if id == nil || c.closing.Load() {
			continue
		}
		if (f.User == "" || id.user == f.User) && (f.Vhost == "" || id.vhost == f.Vhost) &&
			(f.Name == "" || c.name() == f.Name) {
			match = append(match, c)
		}
		if f.Limit > 0 && len(match) == f.Limit {
			break
		}
	}
	closed := make([]ClosedConnection, len(match))
	for i, c := range match {
		c.forceClose(e)
		id := c.ident.Load()
		closed[i] = ClosedConnection{Name: c.name(), User: id.user, Vhost: id.vhost}
	}
	return closed
}
