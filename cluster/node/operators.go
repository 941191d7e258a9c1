package node

import (
	"net"

	"github.com/warrenmq/warren/cluster/broker"
)

// operators answers the admin service's questions about users from the
// broker's model: operators are the cluster's users, with RabbitMQ's
// tags deciding what each may do (cluster/admin's authz.go).
type operators struct{ b *broker.Broker }

func (o operators) CheckPassword(user, password string, from net.Addr) ([]string, bool) {
	u, err := o.b.Authenticate("PLAIN", user, password, from)
	if err != nil {
		return nil, false
	}
	return u.Tags, true
}

func (o operators) Tags(user string, from net.Addr) ([]string, bool) {
	u, err := o.b.AuthenticateExternal(user, from)
	if err != nil {
		return nil, false
	}
	return u.Tags, true
}

func (o operators) CanAccessVhost(user, vhost string) bool { return o.b.Permitted(user, vhost) }
