package server

import "github.com/warrenmq/warren/amqp"

// CloseConnections closes, with 320 CONNECTION_FORCED ("broker forced
// connection closure with reason '...'", as RabbitMQ words it), the open
// connections of user in vhost (an empty user or vhost matches any), as
// RabbitMQ closes a deleted user's and a deleted vhost's connections. It
// does not wait for them to go, and returns how many it closed.
func (s *Server) CloseConnections(user, vhost, reason string) int {
	s.mu.Lock()
	var match []*conn
	for c := range s.conns {
		id := c.ident.Load()
		if id == nil { // still in its handshake: it cannot open a vhost it lost
			continue
		}
		if (user == "" || id.user == user) && (vhost == "" || id.vhost == vhost) {
			match = append(match, c)
		}
	}
	s.mu.Unlock()
	for _, c := range match {
		c.forceClose(amqp.Errorf(amqp.ConnectionForced, "broker forced connection closure with reason '%s'", reason))
	}
	if len(match) > 0 {
		s.log.Info("closed client connections", "reason", reason, "connections", len(match))
	}
	return len(match)
}
