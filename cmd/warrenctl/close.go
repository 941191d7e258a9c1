package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/warrenmq/warren/proto/adminpb"
)

// close connection, close connections: as rabbitmqctl close_connection,
// close_all_connections and close_all_user_connections.

func init() {
	commands = append(commands, &command{
		name:    "close connection",
		args:    []string{"NAME", "REASON"},
		summary: "close one client connection, telling the client REASON",
		help: `Closes the client connection NAME (as list connections names it: "client
address -> server address"), on whichever node it is, with 320
CONNECTION_FORCED and REASON as the text the client gets ("CONNECTION_FORCED -
REASON"), as rabbitmqctl close_connection does. The client's channels go with
it: its unacknowledged messages return to their queues. Exits 1 if no such
connection was found.`,
		setup: closeConnections(true),
	}, &command{
		name:    "close connections",
		args:    []string{"REASON"},
		summary: "close every client connection that matches, telling the clients REASON",
		help: `Closes the client connections of every node that match --vhost, --user and
--on (the node they are connected to), at most --limit of them, with 320
CONNECTION_FORCED and REASON as their text, as rabbitmqctl
close_all_connections and close_all_user_connections do. Without a filter,
every client connection of the cluster. Lists those closed; exits 1 if a node
could not be asked.`,
		setup: closeConnections(false),
	})
}

type closeReport struct {
	Closed      []closedRow `json:"closed"`
	Unreachable []nodeError `json:"unreachable"`
	// name is the one connection asked for (close connection).
	name string
}

type closedRow struct {
	Node  string `json:"node"`
	Name  string `json:"name"`
	User  string `json:"user"`
	Vhost string `json:"vhost"`
}

func closeConnections(one bool) func(fs *flag.FlagSet) body {
	return func(fs *flag.FlagSet) body {
		var vhost, user, on *string
		var limit *uint
		if !one {
			vhost = fs.String("vhost", "", "only connections to this `vhost`")
			user = fs.String("user", "", "only connections of this `user`")
			on = fs.String("on", "", "only connections to this `node`")
			limit = fs.Uint("limit", 0, "close at most this `many` (0: no limit)")
		}
		return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
			req := &adminpb.CloseConnectionsRequest{Reason: args[len(args)-1]}
			r := &closeReport{Closed: []closedRow{}, Unreachable: []nodeError{}}
			if one {
				req.Name, r.name = args[0], args[0]
			} else {
				req.Vhost, req.User, req.Node, req.Limit = *vhost, *user, *on, uint32(*limit)
			}
			resp, err := c.CloseConnections(ctx, req)
			if err != nil {
				return nil, err
			}
			for _, k := range resp.Closed {
				r.Closed = append(r.Closed, closedRow{Node: k.Node, Name: k.Name, User: k.User, Vhost: k.Vhost})
			}
			for _, u := range resp.Unreachable {
				r.Unreachable = append(r.Unreachable, nodeError{Node: u.Node, Error: u.Error})
			}
			return r, nil
		}
	}
}

// failed: the one connection asked for was not found, or a node could not
// be asked.
func (r *closeReport) failed() bool {
	return len(r.Unreachable) > 0 || (r.name != "" && len(r.Closed) == 0)
}

func (r *closeReport) writeText(w io.Writer) {
	switch {
	case r.name != "" && len(r.Closed) == 0:
		fmt.Fprintf(w, "No connection named '%s'.\n", r.name)
	case len(r.Closed) == 0:
		fmt.Fprintln(w, "No connection to close.")
	default:
		fmt.Fprintf(w, "Closed %d connection(s).\n\n", len(r.Closed))
		var rows [][]string
		for _, k := range r.Closed {
			rows = append(rows, []string{k.Node, k.Name, k.User, k.Vhost})
		}
		table(w, []string{"NODE", "NAME", "USER", "VHOST"}, rows)
	}
	for i, u := range r.Unreachable {
		if i == 0 {
			fmt.Fprintf(w, "\nIncomplete: not every node could be asked.\n")
		}
		fmt.Fprintf(w, "%s: %s\n", u.Node, u.Error)
	}
}
