package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/warrenmq/warren/proto/adminpb"
)

// The commands' bodies and reports. Each report's JSON field names are
// warrenctl's output format for scripts: add fields, never rename them.

// cluster status

type clusterReport struct {
	Node           string       `json:"node"` // the node that answered
	MetadataLeader string       `json:"metadata_leader"`
	Nodes          []nodeReport `json:"nodes"`
}

type nodeReport struct {
	Name         string `json:"name"`
	State        string `json:"state"`
	MetadataRole string `json:"metadata_role"`
	AMQP         string `json:"amqp_addr"`
	Internal     string `json:"internal_addr"`
	Gossip       string `json:"gossip_addr"`
	Version      string `json:"version"`
	// Maintenance is "drained" for a node in maintenance mode (warrenctl
	// drain), absent otherwise: a string, as the other fields are.
	Maintenance string `json:"maintenance,omitempty"`
	// Alarms are the resource alarms in effect on the node ("memory",
	// "disk"); while any node has one, publishers are blocked.
	Alarms []string `json:"alarms,omitempty"`
	// QueueMachine is the newest quorum queue machine version the node's
	// build applies (null: a build from before machine versions).
	QueueMachine *uint32 `json:"queue_machine"`
}

func clusterStatus(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ClusterStatus(ctx, &adminpb.ClusterStatusRequest{})
		if err != nil {
			return nil, err
		}
		r := &clusterReport{Node: resp.Node, MetadataLeader: resp.MetadataLeader, Nodes: []nodeReport{}}
		for _, n := range resp.Nodes {
			r.Nodes = append(r.Nodes, nodeReportOf(n))
		}
		return r, nil
	}
}

func nodeReportOf(n *adminpb.Node) nodeReport {
	r := nodeReport{Name: n.Name, State: n.State, MetadataRole: n.MetadataRole, AMQP: n.AmqpAddr, Internal: n.InternalAddr,
		Gossip: n.GossipAddr, Version: n.Version, Maintenance: maintenance(n.Draining), Alarms: n.Alarms}
	if n.QueueMachine > 0 {
		r.QueueMachine = &n.QueueMachine
	}
	return r
}

func (r *clusterReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Cluster status as node %s sees it\n", r.Node)
	leader := r.MetadataLeader
	if leader == "" {
		leader = "none (the metadata group has no quorum, or is electing)"
	}
	fmt.Fprintf(w, "Metadata leader: %s\n", leader)
	fmt.Fprintf(w, "Nodes: %s\n\n", countBy(r.Nodes, func(n nodeReport) string { return n.State }, "alive", "suspect", "dead", "left"))
	var rows [][]string
	for _, n := range r.Nodes {
		state := n.State
		if n.Maintenance != "" { // maintenance mode: "alive/drained"
			state += "/" + n.Maintenance
		}
		rows = append(rows, []string{n.Name, state, n.MetadataRole, orDash(n.AMQP), orDash(n.Internal), orDash(n.Gossip), orDash(n.Version), u32p(n.QueueMachine), orDash(strings.Join(n.Alarms, ","))})
	}
	table(w, []string{"NODE", "STATE", "METADATA", "AMQP", "INTERNAL", "GOSSIP", "VERSION", "MACHINE", "ALARMS"}, rows)
}

// countBy is "3 (2 alive, 1 dead)": how many items there are, and how
// many of each kind, kinds in the given order first.
func countBy[T any](items []T, kind func(T) string, order ...string) string {
	counts := map[string]int{}
	for _, it := range items {
		k := kind(it)
		if counts[k] == 0 && !contains(order, k) {
			order = append(order, k)
		}
		counts[k]++
	}
	var parts []string
	for _, k := range order {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", len(items), strings.Join(parts, ", "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// list queues

type queuesReport struct {
	Vhost  string        `json:"vhost,omitempty"` // the vhost asked for; empty for all
	Queues []queueReport `json:"queues"`
}

type queueReport struct {
	Vhost         string   `json:"vhost"`
	Name          string   `json:"name"`
	Type          string   `json:"type"`
	Leader        string   `json:"leader"`
	Members       []string `json:"members"`
	OnlineMembers []string `json:"online_members"`
	Messages      uint64   `json:"messages"`
	Ready         uint64   `json:"ready"`
	Unacked       uint64   `json:"unacked"`
	Consumers     uint32   `json:"consumers"`
	// DeadLettered: at-least-once dead letters waiting for their
	// targets' confirms (RabbitMQ's messages_dlx).
	DeadLettered uint64 `json:"dead_lettered"`
	// Delayed: returned messages waiting out a delayed retry (RabbitMQ
	// 4.3's messages_delayed).
	Delayed uint64 `json:"delayed"`
}

func listQueues(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "", "only this `vhost`'s queues (default: every vhost)")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ListQueues(ctx, &adminpb.ListQueuesRequest{Vhost: *vhost})
		if err != nil {
			return nil, err
		}
		r := &queuesReport{Vhost: *vhost, Queues: []queueReport{}}
		for _, q := range resp.Queues {
			r.Queues = append(r.Queues, queueReport{Vhost: q.Vhost, Name: q.Name, Type: q.Type, Leader: q.Leader,
				Members: nonNil(q.Members), OnlineMembers: nonNil(q.OnlineMembers),
				Messages: q.Messages, Ready: q.Ready, Unacked: q.Unacked, Consumers: q.Consumers, DeadLettered: q.DeadLettered, Delayed: q.Delayed})
		}
		return r, nil
	}
}

func (r *queuesReport) writeText(w io.Writer) {
	if len(r.Queues) == 0 {
		if r.Vhost != "" {
			fmt.Fprintf(w, "No queues in vhost '%s'.\n", r.Vhost)
		} else {
			fmt.Fprintln(w, "No queues.")
		}
		return
	}
	var rows [][]string
	for _, q := range r.Queues {
		rows = append(rows, []string{q.Vhost, q.Name, q.Type, orDash(q.Leader), u64(q.Messages), u64(q.Ready), u64(q.Unacked),
			u64(q.DeadLettered), u64(q.Delayed), strconv.Itoa(int(q.Consumers)), fmt.Sprintf("%d/%d", len(q.OnlineMembers), len(q.Members)), strings.Join(q.Members, ",")})
	}
	table(w, []string{"VHOST", "NAME", "TYPE", "LEADER", "MESSAGES", "READY", "UNACKED", "DLX", "DELAYED", "CONSUMERS", "ONLINE", "MEMBERS"}, rows)
}

// quorum status

type quorumReport struct {
	Vhost   string         `json:"vhost"`
	Queue   string         `json:"queue"`
	QueueID string         `json:"queue_id"`
	Leader  string         `json:"leader"` // empty if no member reports itself leader
	Members []memberReport `json:"members"`
}

// memberReport's numbers are null for an unreachable member, and lag also
// when no leader answered.
type memberReport struct {
	Node         string  `json:"node"`
	Role         string  `json:"role"`
	Term         *uint64 `json:"term"`
	CommitIndex  *uint64 `json:"commit_index"`
	AppliedIndex *uint64 `json:"applied_index"`
	LastLogIndex *uint64 `json:"last_log_index"`
	// SnapshotIndex is null while the member hibernates (not known
	// without opening it).
	SnapshotIndex *uint64 `json:"snapshot_index"`
	Lag           *uint64 `json:"lag"`
	// MachineVersion is the queue machine version the member has
	// applied; null while it hibernates or when its node does not say
	// (a build before machine versions).
	MachineVersion *uint32 `json:"machine_version"`
	Error          string  `json:"error,omitempty"` // why it is unreachable
}

func quorumStatus(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the queue's `vhost`")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.QuorumStatus(ctx, &adminpb.QuorumStatusRequest{Vhost: *vhost, Name: args[0]})
		if err != nil {
			return nil, err
		}
		r := &quorumReport{Vhost: resp.Vhost, Queue: resp.Name, QueueID: resp.QueueId, Leader: resp.Leader, Members: []memberReport{}}
		for _, m := range resp.Members {
			r.Members = append(r.Members, newMemberReport(m))
		}
		return r, nil
	}
}

// newMemberReport is what a member's own answer shows.
func newMemberReport(m *adminpb.Member) memberReport {
	mr := memberReport{Node: m.Node, Role: m.Role, Lag: m.Lag, Error: m.Error}
	if m.Role != "unreachable" {
		mr.Term, mr.CommitIndex, mr.AppliedIndex, mr.LastLogIndex = &m.Term, &m.CommitIndex, &m.AppliedIndex, &m.LastLogIndex
		if m.Role != "asleep" {
			mr.SnapshotIndex = &m.SnapshotIndex
		}
		if m.MachineVersion > 0 {
			mr.MachineVersion = &m.MachineVersion
		}
	}
	return mr
}

func (r *quorumReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Status of quorum queue '%s' in vhost '%s' (Raft group %s)\n", r.Queue, r.Vhost, r.QueueID)
	leader := r.Leader
	if leader == "" {
		leader = "none (no reachable member leads: electing, or no quorum)"
	}
	fmt.Fprintf(w, "Leader: %s\n", leader)
	fmt.Fprintf(w, "Members: %s\n\n", countBy(r.Members, func(m memberReport) string {
		if m.Role == "unreachable" {
			return "unreachable"
		}
		return "answering"
	}, "answering", "unreachable"))
	var rows [][]string
	for _, m := range r.Members {
		rows = append(rows, []string{m.Node, m.Role, u64p(m.Term), u64p(m.CommitIndex), u64p(m.AppliedIndex), u64p(m.LastLogIndex),
			u64p(m.SnapshotIndex), u64p(m.Lag), u32p(m.MachineVersion)})
	}
	table(w, []string{"NODE", "ROLE", "TERM", "COMMIT", "APPLIED", "LAST LOG", "SNAPSHOT", "LAG", "MACHINE"}, rows)
	first := true
	for _, m := range r.Members {
		if m.Error != "" {
			if first {
				fmt.Fprintln(w)
				first = false
			}
			fmt.Fprintf(w, "%s is %s: %s\n", m.Node, m.Role, m.Error)
		}
	}
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

func u64p(n *uint64) string {
	if n == nil {
		return "-"
	}
	return u64(*n)
}

func u32p(n *uint32) string {
	if n == nil {
		return "-"
	}
	return u64(uint64(*n))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// maintenance is nodeReport.Maintenance for a node's drained state.
func maintenance(draining bool) string {
	if draining {
		return "drained"
	}
	return ""
}
