package server

import (
	"context"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
)

// Maintenance mode (warrenctl drain), as RabbitMQ's rabbitmq-upgrade drain
// does it: the client listeners are suspended, so no new connection is
// accepted, and every open client connection is closed with 320
// CONNECTION_FORCED, so that clients reconnect to another node. Resume
// accepts again.
//
// RabbitMQ closes its listening sockets; Warren keeps its listener (and
// its port) and closes each new TCP connection at once, before the AMQP
// handshake, which a client sees the same way: the connection fails and
// it tries the next node.

// MaintenanceReason is the connection.close text clients get when the
// node is drained.
const MaintenanceReason = "Node was put into maintenance mode"

// Suspend stops accepting client connections, closes the open ones with
// 320 CONNECTION_FORCED and waits (within ctx) until they are gone. It
// returns how many connections it closed. A suspended server stays so
// until Resume.
func (s *Server) Suspend(ctx context.Context) (int, error) {
	s.mu.Lock()
	s.suspended = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.forceClose(wire.Errorf(wire.ConnectionForced, "broker forced connection closure with reason '%s'", MaintenanceReason))
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for s.ConnectionCount() > 0 {
		select {
		case <-ctx.Done():
			return len(conns), ctx.Err()
		case <-t.C:
		}
	}
	if len(conns) > 0 {
		s.log.Info("suspended client connections for maintenance", "closed", len(conns))
	}
	return len(conns), nil
}

// Resume accepts client connections again after Suspend.
func (s *Server) Resume() {
	s.mu.Lock()
	was := s.suspended
	s.suspended = false
	s.mu.Unlock()
	if was {
		s.log.Info("accepting client connections again after maintenance")
	}
}

// Suspended reports whether Suspend is in force.
func (s *Server) Suspended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.suspended
}
