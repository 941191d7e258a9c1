package node

// MetadataServers are the members of the metadata group, as this node's
// copy of its configuration has them.
func (n *Node) MetadataServers() []string {
	servers, err := n.cluster.meta.Servers()
	if err != nil {
		return nil
	}
	var names []string
	for _, s := range servers {
		names = append(names, s.ID)
	}
	return names
}

// GossipMembers are the nodes gossip shows this node, alive or not.
func (n *Node) GossipMembers() []string {
	var names []string
	for _, m := range n.cluster.gossip.Members() {
		names = append(names, m.Name)
	}
	return names
}
