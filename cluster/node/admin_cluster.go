package node

import (
	"slices"

	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/metaraft"
	"github.com/warrenmq/warren/membership"
)

// clusterAdmin answers for the cluster's nodes: gossip's view of them
// and the metadata group's.
type clusterAdmin struct {
	c *clusterNode
	b *broker.Broker
}

func (a clusterAdmin) Self() string { return a.c.self }

func (a clusterAdmin) Nodes() []admin.NodeInfo {
	servers, _ := a.c.meta.Servers()
	leader, _ := a.c.meta.Leader()
	role := func(name string) admin.MetadataRole {
		i := slices.IndexFunc(servers, func(s metaraft.Server) bool { return s.ID == name })
		switch {
		case i < 0:
			return admin.MetadataRoleNone
		case name == leader:
			return admin.MetadataRoleLeader
		case servers[i].Voter:
			return admin.MetadataRoleVoter
		}
		return admin.MetadataRoleNonVoter
	}
	var out []admin.NodeInfo
	seen := map[string]bool{}
	for _, m := range a.c.gossip.Members() {
		seen[m.Name] = true
		if forgotten(m, role(m.Name)) { // drain.go
			continue
		}
		out = append(out, admin.NodeInfo{Member: m, MetadataRole: role(m.Name), Draining: a.b.Draining(m.Name)})
	}
	for _, s := range servers {
		if !seen[s.ID] {
			m := membership.Member{Meta: membership.Meta{Name: s.ID, Internal: s.Addr}, State: membership.Dead}
			out = append(out, admin.NodeInfo{Member: m, MetadataRole: role(s.ID), Draining: a.b.Draining(s.ID)})
		}
	}
	return out
}

func (a clusterAdmin) MetadataLeader() string {
	leader, _ := a.c.meta.Leader()
	return leader
}

func (a clusterAdmin) NodeAddr(node string) (string, bool) { return a.c.addrOf(node) }

// forgotten reports whether gossip member m is a node removed from the
// cluster (warrenctl cluster forget): gone from gossip's view (dead or
// left) and no longer in the metadata group. Cluster status leaves it out.
func forgotten(m membership.Member, role admin.MetadataRole) bool {
	return (m.State == membership.Dead || m.State == membership.Left) && role == admin.MetadataRoleNone
}
