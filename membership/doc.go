// Package membership discovers the cluster's nodes and detects their
// failure with hashicorp/memberlist (SWIM gossip). It only observes: the
// metadata group's leader turns what it sees into Raft membership changes,
// as nomad's reconcileMember does.
package membership
