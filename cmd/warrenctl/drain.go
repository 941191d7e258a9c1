package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Maintenance mode, as rabbitmq-upgrade drain and revive, and removing a
// dead node for good, as rabbitmqctl forget_cluster_node.

var drainCommands = []*command{
	{
		name:    "drain",
		args:    []string{"NODE"},
		summary: "put NODE into maintenance mode before stopping it",
		help: `Puts NODE into maintenance mode, as rabbitmq-upgrade drain does: the drained
state is committed to the metadata group, so no node places new queues on
NODE; NODE closes its client connections (320 CONNECTION_FORCED, "Node was put
into maintenance mode") and refuses new ones, so clients reconnect to other
nodes; every quorum queue leadership moves off NODE by Raft leadership
transfer; and NODE's replicas stop starting elections (their Raft heartbeat
and election timeouts are raised; they still vote and replicate, so no queue
loses fault tolerance). Answered once all of that is done. The state lasts,
across restarts, until 'warrenctl undrain NODE'.`,
		setup:   drain,
		timeout: 5 * time.Minute,
	},
	{
		name:    "undrain",
		args:    []string{"NODE"},
		summary: "take NODE out of maintenance mode",
		help: `Takes NODE out of maintenance mode, as rabbitmq-upgrade revive does: new
queues may be placed on it again, it accepts client connections and its
replicas take part in elections. Leaderships are not moved back: run
'warrenctl rebalance' for that.`,
		setup:   undrain,
		timeout: time.Minute,
	},
	{
		name:    "cluster forget",
		args:    []string{"NODE"},
		summary: "remove a dead NODE from the cluster for good",
		help: `Removes NODE, which must be stopped (gossip sees it dead or left), from the
cluster for good, as rabbitmqctl forget_cluster_node does: its replica is
removed from every quorum queue's members (forced: the queues keep their other
members even below their target size; 'warrenctl grow' adds replicas
elsewhere), then NODE leaves the metadata Raft group. Refused while NODE is
alive. A forgotten node must not be started again with its old data.`,
		setup:   forgetNode,
		timeout: 10 * time.Minute,
	},
}

func init() { commands = append(commands, drainCommands...) }

type drainReport struct {
	Operation         string     `json:"operation"`
	Node              string     `json:"node"`
	ConnectionsClosed uint32     `json:"connections_closed"`
	Moves             []moveItem `json:"moves"`
}

type moveItem struct {
	Vhost string `json:"vhost"`
	Name  string `json:"name"`
	From  string `json:"from"`
	To    string `json:"to"`
	Error string `json:"error,omitempty"`
}

func drain(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.Drain(ctx, &adminpb.DrainRequest{Node: args[0]})
		if err != nil {
			return nil, err
		}
		r := &drainReport{Operation: "drain", Node: args[0], ConnectionsClosed: resp.ConnectionsClosed, Moves: []moveItem{}}
		for _, m := range resp.Moves {
			r.Moves = append(r.Moves, moveItem{Vhost: m.Vhost, Name: m.Name, From: m.From, To: m.To, Error: m.Error})
		}
		return r, nil
	}
}

func undrain(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		if _, err := c.Undrain(ctx, &adminpb.DrainRequest{Node: args[0]}); err != nil {
			return nil, err
		}
		return &drainReport{Operation: "undrain", Node: args[0], Moves: []moveItem{}}, nil
	}
}

func (r *drainReport) writeText(w io.Writer) {
	if r.Operation == "undrain" {
		fmt.Fprintf(w, "Node %s is out of maintenance mode\n", r.Node)
		return
	}
	fmt.Fprintf(w, "Node %s is in maintenance mode: %d client connection(s) closed, %d leadership(s) moved\n",
		r.Node, r.ConnectionsClosed, len(r.Moves))
	if len(r.Moves) == 0 {
		return
	}
	var rows [][]string
	for _, m := range r.Moves {
		rows = append(rows, []string{m.Vhost, m.Name, m.From, m.To, orDash(m.Error)})
	}
	fmt.Fprintln(w)
	table(w, []string{"VHOST", "QUEUE", "FROM", "TO", "ERROR"}, rows)
}

func forgetNode(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.ForgetNode(ctx, &adminpb.ForgetNodeRequest{Node: args[0]})
		if err != nil {
			return nil, err
		}
		return &forgetReport{newMembershipReport("forget", args[0], resp)}, nil
	}
}

// forgetReport is a membership report that ends with the node's removal.
type forgetReport struct{ *membershipReport }

func (r *forgetReport) writeText(w io.Writer) {
	for _, q := range r.Changed {
		fmt.Fprintf(w, "Removed %s from the members of queue %s.\n", r.Node, q)
	}
	fmt.Fprintf(w, "Node %s was removed from the cluster.\n", r.Node)
}
