package node

import (
	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/rpc"
)

// AdminService is the node's operator service, for front ends in this
// process that call it directly (cluster/management): a cluster member's
// own, which answers for the whole cluster, or for a standalone node one
// that answers for the node alone (as its warrenctl port does).
func (n *Node) AdminService() *admin.Server {
	if n.cluster != nil {
		return n.cluster.adminSrv
	}
	return admin.NewServer(newStandaloneAdmin(n, "", n.cfg.Version), rpc.NewPool(), n.log)
}

// Operators checks the cluster's users' passwords and tells their tags
// and vhosts, as the admin service does for warrenctl.
func (n *Node) Operators() admin.Users { return operators{n.broker} }
