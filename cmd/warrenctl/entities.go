package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Exchanges, bindings and queue operations, as rabbitmqctl's
// list_exchanges, list_bindings, delete_queue and purge_queue.

var entityCommands = []*command{
	{
		name:    "list exchanges",
		summary: "exchanges with their type, flags and arguments",
		help:    `Lists the exchanges of --vhost (default: every vhost), the predeclared ones among them (the default exchange shows as ""), as rabbitmqctl list_exchanges: type, durable, auto-delete, internal, arguments.`,
		setup:   listExchanges,
	},
	{
		name:    "list bindings",
		summary: "bindings from exchanges to queues and exchanges",
		help: `Lists the bindings of --vhost (default: every vhost), as rabbitmqctl
list_bindings: source exchange (the default exchange, "", binds every queue
under its own name), destination and its type, routing key, arguments.`,
		setup: listBindings,
	},
	{
		name:    "delete queue",
		args:    []string{"QUEUE"},
		summary: "delete a queue and its messages",
		help: `Deletes QUEUE of --vhost with its messages, as rabbitmqctl delete_queue: its
consumers are cancelled (basic.cancel to those that asked for it), a quorum
queue's Raft group goes from every member. --if-unused and --if-empty refuse
as queue.delete's flags do (RabbitMQ does not take them for quorum queues).
Unlike queue.delete, a queue that does not exist is an error.`,
		setup: deleteQueue,
	},
	{
		name:    "purge queue",
		args:    []string{"QUEUE"},
		summary: "remove a queue's ready messages",
		help:    `Removes the ready messages of QUEUE in --vhost, as rabbitmqctl purge_queue; messages delivered and not yet acknowledged stay.`,
		setup:   purgeQueue,
	},
}

func init() { commands = append(commands, entityCommands...) }

type exchangesReport struct {
	Exchanges []exchangeReport `json:"exchanges"`
}

type exchangeReport struct {
	Vhost      string `json:"vhost"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
	Internal   bool   `json:"internal"`
	Arguments  string `json:"arguments,omitempty"`
}

func listExchanges(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "", "only this `vhost`'s exchanges (default: every vhost)")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ListExchanges(ctx, &adminpb.ListExchangesRequest{Vhost: *vhost})
		if err != nil {
			return nil, err
		}
		r := &exchangesReport{Exchanges: []exchangeReport{}}
		for _, x := range resp.Exchanges {
			r.Exchanges = append(r.Exchanges, exchangeReport{Vhost: x.Vhost, Name: x.Name, Type: x.Type,
				Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Arguments: x.Arguments})
		}
		return r, nil
	}
}

func (r *exchangesReport) writeText(w io.Writer) {
	var rows [][]string
	for _, x := range r.Exchanges {
		rows = append(rows, []string{x.Vhost, quoted(x.Name), x.Type, yesNo(x.Durable), yesNo(x.AutoDelete), yesNo(x.Internal), orDash(x.Arguments)})
	}
	table(w, []string{"VHOST", "NAME", "TYPE", "DURABLE", "AUTO-DELETE", "INTERNAL", "ARGUMENTS"}, rows)
}

type bindingsReport struct {
	Bindings []bindingReport `json:"bindings"`
}

type bindingReport struct {
	Vhost           string `json:"vhost"`
	Source          string `json:"source"`
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
	RoutingKey      string `json:"routing_key"`
	Arguments       string `json:"arguments,omitempty"`
}

func listBindings(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "", "only this `vhost`'s bindings (default: every vhost)")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ListBindings(ctx, &adminpb.ListBindingsRequest{Vhost: *vhost})
		if err != nil {
			return nil, err
		}
		r := &bindingsReport{Bindings: []bindingReport{}}
		for _, b := range resp.Bindings {
			r.Bindings = append(r.Bindings, bindingReport{Vhost: b.Vhost, Source: b.Source, Destination: b.Destination,
				DestinationType: b.DestinationType, RoutingKey: b.RoutingKey, Arguments: b.Arguments})
		}
		return r, nil
	}
}

func (r *bindingsReport) writeText(w io.Writer) {
	var rows [][]string
	for _, b := range r.Bindings {
		rows = append(rows, []string{b.Vhost, quoted(b.Source), b.Destination, b.DestinationType, quoted(b.RoutingKey), orDash(b.Arguments)})
	}
	table(w, []string{"VHOST", "SOURCE", "DESTINATION", "TYPE", "ROUTING KEY", "ARGUMENTS"}, rows)
}

// quoted shows a name that may be empty (the default exchange, a routing
// key) so that it can be seen.
func quoted(s string) string { return "'" + s + "'" }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func deleteQueue(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the queue's `vhost`")
	ifUnused := fs.Bool("if-unused", false, "only if the queue has no consumer")
	ifEmpty := fs.Bool("if-empty", false, "only if the queue has no ready message")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.DeleteQueue(ctx, &adminpb.DeleteQueueRequest{Vhost: *vhost, Name: args[0], IfUnused: *ifUnused, IfEmpty: *ifEmpty})
		if err != nil {
			return nil, err
		}
		return &queueMessagesReport{Done: fmt.Sprintf("Deleted queue '%s' in vhost '%s' with %d message(s).", args[0], *vhost, resp.Messages), Messages: resp.Messages}, nil
	}
}

func purgeQueue(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the queue's `vhost`")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.PurgeQueue(ctx, &adminpb.PurgeQueueRequest{Vhost: *vhost, Name: args[0]})
		if err != nil {
			return nil, err
		}
		return &queueMessagesReport{Done: fmt.Sprintf("Purged %d message(s) from queue '%s' in vhost '%s'.", resp.Messages, args[0], *vhost), Messages: resp.Messages}, nil
	}
}

type queueMessagesReport struct {
	Done     string `json:"done"`
	Messages uint32 `json:"messages"`
}

func (r *queueMessagesReport) writeText(w io.Writer) { fmt.Fprintln(w, r.Done) }
