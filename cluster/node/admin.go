package node

import (
	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
)

// adminBackend answers the admin service (warrenctl) from this node's
// state. The service's interface spans every area of the node, so the
// backend is put together from one part per area, each holding only what
// its area reads; their methods make up the whole. lateBackend hands it
// to the service once the broker exists.
type adminBackend struct {
	clusterAdmin     // the cluster's nodes (admin_cluster.go)
	connectionAdmin  // client connections and the node's status (admin_connections.go)
	groupAdmin       // queues and their groups' members (admin_queues.go)
	memberAdmin      // queue membership changes (admin_members.go)
	policyAdmin      // policies (admin_policies.go)
	accessAdmin      // users, vhosts, permissions (access.go)
	entityAdmin      // exchanges, bindings, queue operations (entities.go)
	definitionAdmin  // definitions export and import (definitions.go)
	alarmAdmin       // resource alarms (alarms.go)
	maintenanceAdmin // drain and forget (drain.go)
}

// newAdminBackend is n's backend; n is a cluster member whose broker b is
// up.
func newAdminBackend(n *Node, c *clusterNode, b *broker.Broker) *adminBackend {
	return &adminBackend{
		clusterAdmin:     clusterAdmin{c: c, b: b},
		connectionAdmin:  connectionAdmin{c: c, b: b, n: n},
		groupAdmin:       groupAdmin{c: c, b: b, n: n},
		memberAdmin:      memberAdmin{n: n},
		policyAdmin:      policyAdmin{b: b},
		accessAdmin:      accessAdmin{b: b},
		entityAdmin:      entityAdmin{b: b},
		definitionAdmin:  definitionAdmin{b: b, version: c.cfg.Version},
		alarmAdmin:       alarmAdmin{b: b, n: n},
		maintenanceAdmin: maintenanceAdmin{c: c, b: b, n: n},
	}
}

var _ admin.Backend = (*adminBackend)(nil)

var (
	_ admin.ConnectionsBackend = (*adminBackend)(nil)
	_ admin.ConnectionsBackend = (*lateBackend)(nil)
	_ admin.ConsumersBackend   = (*adminBackend)(nil)
	_ admin.ConsumersBackend   = (*lateBackend)(nil)
	_ admin.PeekBackend        = (*adminBackend)(nil)
	_ admin.CheckpointBackend  = (*adminBackend)(nil)
	_ admin.GrowToCountBackend = (*adminBackend)(nil)
	_ admin.StatusBackend      = (*adminBackend)(nil)
	_ admin.ConnectionCloser   = (*adminBackend)(nil)
	_ admin.AlarmsBackend      = (*adminBackend)(nil)
	_ admin.MaintenanceBackend = (*adminBackend)(nil)
	_ admin.AccessBackend      = (*adminBackend)(nil)
	_ admin.EntitiesBackend    = (*adminBackend)(nil)
	_ admin.DefinitionsBackend = (*adminBackend)(nil)
	_ admin.Waker              = (*adminBackend)(nil)
	_ admin.Deferred           = (*lateBackend)(nil)
)
