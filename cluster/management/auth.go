package management

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"slices"
	"time"

	"google.golang.org/grpc/metadata"
)

// Who may do what follows RabbitMQ's management plugin:
//
//   - management: log in; see and act on the objects of the vhosts the
//     user has permissions in (the broker checks each permission for
//     what is done over AMQP), and the user's own connections;
//   - policymaker: that, plus policies in those vhosts;
//   - monitoring: that, plus every vhost, connection, channel and node
//     for reading;
//   - administrator: everything.
//
// A user without one of these tags cannot use the API at all, as in
// RabbitMQ. The guest user, loopback-only, may log in only from the
// node's own host.

// caller is an authenticated user of the API.
type caller struct {
	name, password string
	tags           []string
}

func (c *caller) has(tags ...string) bool {
	for _, t := range tags {
		if slices.Contains(c.tags, t) {
			return true
		}
	}
	return false
}

func (c *caller) isAdmin() bool       { return c.has("administrator") }
func (c *caller) isMonitor() bool     { return c.has("administrator", "monitoring") }
func (c *caller) isPolicymaker() bool { return c.has("administrator", "policymaker") }

// authenticate finds who made r. A request without credentials, or with
// wrong ones, or by a user without a management tag is refused.
func (s *Server) authenticate(r *http.Request) (*caller, error) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return nil, notAuthorised("Not_Authorized")
	}
	from := remoteAddr(r)
	if d := s.logins.Delay(from); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	tags, ok := s.cfg.Users.CheckPassword(user, pass, from)
	if !ok {
		s.logins.Failed(from)
		return nil, notAuthorised("Login failed")
	}
	s.logins.Succeeded(from)
	c := &caller{name: user, password: pass, tags: tags}
	if !c.has("management", "policymaker", "monitoring", "administrator") {
		return nil, notAuthorised("Not management user")
	}
	return c, nil
}

// seesVhost reports whether c may see vhost's objects.
func (s *Server) seesVhost(c *caller, vhost string) bool {
	return c.isMonitor() || s.cfg.Users.CanAccessVhost(c.name, vhost)
}

// requireVhost answers for a path naming vhost: 404 if it does not
// exist, 401 if c may not see it.
func (s *Server) requireVhost(ctx context.Context, c *caller, vhost string) error {
	exists, err := s.vhostExists(ctx, vhost)
	if err != nil {
		return err
	}
	if !exists {
		return notFound()
	}
	if !s.seesVhost(c, vhost) {
		return notAuthorised("User not authorised to access virtual host")
	}
	return nil
}

func requireAdmin(c *caller) error {
	if !c.isAdmin() {
		return notAuthorised("Not administrator user")
	}
	return nil
}

func requireMonitor(c *caller) error {
	if !c.isMonitor() {
		return notAuthorised("Not monitor user")
	}
	return nil
}

// callContext is the context of the admin calls made for c: where the
// admin service asks another node, c's credentials go with the call.
func callContext(ctx context.Context, c *caller) context.Context {
	cred := base64.StdEncoding.EncodeToString([]byte(c.name + ":" + c.password))
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+cred)
}

func remoteAddr(r *http.Request) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		return nil
	}
	return a
}
