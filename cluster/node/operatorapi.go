package node

import (
	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/rpc"
)

// OperatorAPI is what front ends in this process that serve operators
// (cluster/management) call directly. svc is the node's operator
// service: a cluster member's own, which answers for the whole cluster,
// or for a standalone node one that answers for the node alone (as its
// warrenctl port does). users checks the cluster's users' passwords and
// tells their tags and vhosts, as the admin service does for warrenctl.
func (n *Node) OperatorAPI() (svc *admin.Server, users admin.Users) {
	users = operators{n.broker}
	if n.cluster != nil {
		return n.cluster.adminSrv, users
	}
	return admin.NewServer(newStandaloneAdmin(n, "", n.cfg.Version), rpc.NewPool(), n.log), users
}
