package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Leadership operations and the health checks that go with them, as
// rabbitmq-queues rebalance and rabbitmq-diagnostics
// check_if_node_is_quorum_critical.

var leadershipCommands = []*command{
	{
		name:    "transfer leadership",
		args:    []string{"QUEUE", "NODE"},
		summary: "move a quorum queue's leader to one of its members",
		help: `Moves the leadership of quorum queue QUEUE to its member on NODE by Raft
leadership transfer: the leader brings NODE's replica up to date and tells it
to start an election at once. Answered once NODE's replica leads. Any node can
be asked; it finds the leader. Publishes and consumers carry on through the
new leader: publishes the old leader had not committed are sent again and
stored once, and messages delivered but not acknowledged are delivered again,
marked redelivered.`,
		setup:   transferLeadership,
		timeout: 30 * time.Second,
	},
	{
		name:    "rebalance",
		summary: "move quorum queue leaders so that nodes lead about as many each",
		help: `Moves quorum queue leaders, one queue at a time by Raft leadership transfer,
until every alive node holding replicas of the selected queues leads about as
many of them as the others (within one, where the queues' members allow it),
as rabbitmq-queues rebalance quorum does. A queue moves only to one of its
members whose node is alive. Queues without a leader are left alone and
listed. Prints each move and the leaders per node before and after; exits 1
if a move failed.`,
		setup:   rebalance,
		timeout: 10 * time.Minute,
	},
	{
		name:    "check quorum-critical",
		args:    []string{"NODE"},
		summary: "would stopping NODE leave a quorum queue without a majority?",
		help: `Lists the quorum queues that would be left without a majority of their
members online if NODE stopped now, as rabbitmq-diagnostics
check_if_node_is_quorum_critical does: queues with a replica on NODE whose
other online members are fewer than a majority. A member is online when its
node is alive and answers with its replica. Exit status 0 if there are none
(NODE can be stopped), 1 with the list if there are.`,
		setup: checkQuorumCritical,
	},
	{
		name:    "check leaderless",
		summary: "quorum queues that have no leader right now",
		help: `Lists the quorum queues none of whose reachable members leads now: they
accept no publishes and deliver nothing until a majority of their members is
back and elects a leader. Exit status 0 if there are none, 1 with the list if
there are.`,
		setup: checkLeaderless,
	},
	{
		name:    "check replicas-synced",
		args:    []string{"NODE"},
		summary: "have NODE's quorum queue replicas finished their initial sync?",
		help: `Lists the quorum queues whose replica on NODE has not finished its initial
sync, as rabbitmq-queues check_if_new_quorum_queue_replicas_have_finished_initial_sync
does: a replica added by add member, grow or the reconciler is a non-voter
while it receives the log (or a snapshot) and votes once caught up; one the
queue's members name that NODE has not opened yet is also listed. Run it on a
new or restarted node before stopping another. Exit status 0 if there are
none, 1 with the list if there are.`,
		setup: checkReplicasSynced,
	},
}

func init() { commands = append(commands, leadershipCommands...) }

// transfer leadership

type transferReport struct {
	Vhost string `json:"vhost"`
	Queue string `json:"queue"`
	From  string `json:"from"`
	To    string `json:"to"`
	Moved bool   `json:"moved"` // false: To already led
}

func transferLeadership(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the queue's `vhost`")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.TransferLeadership(ctx, &adminpb.TransferLeadershipRequest{Vhost: *vhost, Name: args[0], To: args[1]})
		if err != nil {
			return nil, err
		}
		return &transferReport{Vhost: resp.Vhost, Queue: resp.Name, From: resp.From, To: resp.To, Moved: resp.Moved}, nil
	}
}

func (r *transferReport) writeText(w io.Writer) {
	if !r.Moved {
		fmt.Fprintf(w, "Queue '%s' in vhost '%s' is already led by %s.\n", r.Queue, r.Vhost, r.To)
		return
	}
	fmt.Fprintf(w, "Moved the leader of queue '%s' in vhost '%s' from %s to %s.\n", r.Queue, r.Vhost, r.From, r.To)
}

// rebalance

type rebalanceReport struct {
	Moves      []moveReport  `json:"moves"`
	Nodes      []nodeLeaders `json:"nodes"`
	Leaderless []queueRef    `json:"leaderless"`
	Failed     int           `json:"failed"` // moves with an error
	request    *adminpb.RebalanceRequest
}

type moveReport struct {
	Vhost string `json:"vhost"`
	Queue string `json:"queue"`
	From  string `json:"from"`
	To    string `json:"to"`
	Error string `json:"error,omitempty"`
}

type nodeLeaders struct {
	Node   string `json:"node"`
	Before uint32 `json:"leaders_before"`
	After  uint32 `json:"leaders_after"`
}

type queueRef struct {
	Vhost string `json:"vhost"`
	Queue string `json:"queue"`
}

func rebalance(fs *flag.FlagSet) body {
	vhosts := fs.String("vhost-pattern", "", "only vhosts matching this regular `expression` (default: all)")
	queues := fs.String("queue-pattern", "", "only queues whose name matches this regular `expression` (default: all)")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		req := &adminpb.RebalanceRequest{VhostPattern: *vhosts, QueuePattern: *queues}
		resp, err := c.Rebalance(ctx, req)
		if err != nil {
			return nil, err
		}
		r := &rebalanceReport{Moves: []moveReport{}, Nodes: []nodeLeaders{}, Leaderless: []queueRef{}, request: req}
		for _, m := range resp.Moves {
			r.Moves = append(r.Moves, moveReport{Vhost: m.Vhost, Queue: m.Name, From: m.From, To: m.To, Error: m.Error})
			if m.Error != "" {
				r.Failed++
			}
		}
		for _, n := range resp.Nodes {
			r.Nodes = append(r.Nodes, nodeLeaders{Node: n.Node, Before: n.Before, After: n.After})
		}
		for _, q := range resp.Leaderless {
			r.Leaderless = append(r.Leaderless, queueRef{Vhost: q.Vhost, Queue: q.Name})
		}
		return r, nil
	}
}

func (r *rebalanceReport) failed() bool { return r.Failed > 0 }

func (r *rebalanceReport) writeText(w io.Writer) {
	moved := len(r.Moves) - r.Failed
	switch {
	case len(r.Moves) == 0:
		fmt.Fprintln(w, "Quorum queue leaders are balanced: nothing moved.")
	case r.Failed == 0:
		fmt.Fprintf(w, "Moved %d quorum queue leader(s).\n", moved)
	default:
		fmt.Fprintf(w, "Moved %d quorum queue leader(s); %d move(s) failed.\n", moved, r.Failed)
	}
	if len(r.Moves) > 0 {
		fmt.Fprintln(w)
		var rows [][]string
		for _, m := range r.Moves {
			result := "moved"
			if m.Error != "" {
				result = "failed: " + m.Error
			}
			rows = append(rows, []string{m.Vhost, m.Queue, m.From, m.To, result})
		}
		table(w, []string{"VHOST", "QUEUE", "FROM", "TO", "RESULT"}, rows)
	}
	if len(r.Nodes) > 0 {
		fmt.Fprintln(w)
		var rows [][]string
		for _, n := range r.Nodes {
			rows = append(rows, []string{n.Node, strconv.Itoa(int(n.Before)), strconv.Itoa(int(n.After))})
		}
		table(w, []string{"NODE", "LEADERS BEFORE", "LEADERS AFTER"}, rows)
	}
	if len(r.Leaderless) > 0 {
		var names []string
		for _, q := range r.Leaderless {
			names = append(names, fmt.Sprintf("'%s' in vhost '%s'", q.Queue, q.Vhost))
		}
		fmt.Fprintf(w, "\nLeft alone, without a leader: %s\n", strings.Join(names, ", "))
	}
}

// check quorum-critical, check leaderless, check replicas-synced

type checkReport struct {
	Check  string         `json:"check"` // quorum-critical, leaderless or replicas-synced
	Node   string         `json:"node,omitempty"`
	Passed bool           `json:"passed"`
	Queues []checkedQueue `json:"queues"`
}

type checkedQueue struct {
	Vhost         string   `json:"vhost"`
	Name          string   `json:"name"`
	Leader        string   `json:"leader"`
	Members       []string `json:"members"`
	OnlineMembers []string `json:"online_members"`
	// Replica, for replicas-synced: the node's replica's role (non-voter),
	// or "not open".
	Replica string `json:"replica,omitempty"`
}

func checkQuorumCritical(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.CheckQuorumCritical(ctx, &adminpb.CheckQuorumCriticalRequest{Node: args[0]})
		if err != nil {
			return nil, err
		}
		return checkReportOf("quorum-critical", args[0], resp), nil
	}
}

func checkLeaderless(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "", "only this `vhost`'s queues (default: every vhost)")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.CheckLeaderless(ctx, &adminpb.CheckLeaderlessRequest{Vhost: *vhost})
		if err != nil {
			return nil, err
		}
		return checkReportOf("leaderless", "", resp), nil
	}
}

func checkReplicasSynced(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.CheckReplicasSynced(ctx, &adminpb.CheckReplicasSyncedRequest{Node: args[0]})
		if err != nil {
			return nil, err
		}
		return checkReportOf("replicas-synced", args[0], resp), nil
	}
}

func checkReportOf(check, node string, resp *adminpb.CheckResponse) *checkReport {
	r := &checkReport{Check: check, Node: node, Passed: len(resp.Queues) == 0, Queues: []checkedQueue{}}
	for _, q := range resp.Queues {
		cq := checkedQueue{Vhost: q.Vhost, Name: q.Name, Leader: q.Leader,
			Members: nonNil(q.Members), OnlineMembers: nonNil(q.OnlineMembers)}
		if check == "replicas-synced" {
			cq.Replica = cmp.Or(q.ReplicaRole, "not open")
		}
		r.Queues = append(r.Queues, cq)
	}
	return r
}

func (r *checkReport) failed() bool { return !r.Passed }

func (r *checkReport) writeText(w io.Writer) {
	switch {
	case r.Check == "quorum-critical" && r.Passed:
		fmt.Fprintf(w, "Node %s is not quorum critical: no quorum queue would lose its majority if it stopped.\n", r.Node)
		return
	case r.Check == "quorum-critical":
		fmt.Fprintf(w, "Node %s is quorum critical: %d quorum queue(s) would be left without a majority of online members if it stopped.\n\n", r.Node, len(r.Queues))
	case r.Check == "replicas-synced" && r.Passed:
		fmt.Fprintf(w, "Every quorum queue replica on node %s has finished its initial sync.\n", r.Node)
		return
	case r.Check == "replicas-synced":
		fmt.Fprintf(w, "Node %s has %d quorum queue replica(s) that have not finished their initial sync.\n\n", r.Node, len(r.Queues))
	case r.Passed:
		fmt.Fprintln(w, "Every quorum queue has a leader.")
		return
	default:
		fmt.Fprintf(w, "%d quorum queue(s) have no leader.\n\n", len(r.Queues))
	}
	header := []string{"VHOST", "NAME", "LEADER", "ONLINE", "MEMBERS"}
	if r.Check == "replicas-synced" {
		header = append(header, "REPLICA")
	}
	var rows [][]string
	for _, q := range r.Queues {
		row := []string{q.Vhost, q.Name, orDash(q.Leader), fmt.Sprintf("%d/%d", len(q.OnlineMembers), len(q.Members)),
			strings.Join(q.Members, ",")}
		if r.Check == "replicas-synced" {
			row = append(row, q.Replica)
		}
		rows = append(rows, row)
	}
	table(w, header, rows)
}
