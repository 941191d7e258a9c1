package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Vhost and user limits, as rabbitmqctl set_vhost_limits,
// clear_vhost_limits, list_vhost_limits, set_user_limits,
// clear_user_limits and list_user_limits.

func init() {
	commands = append(commands, &command{
		name:    "set vhost-limits",
		args:    []string{"DEFINITION"},
		summary: "limit a vhost's connections and queues",
		help: `Replaces the limits of --vhost with DEFINITION, a JSON object as rabbitmqctl
set_vhost_limits takes it: {"max-connections": 100, "max-queues": 500}.
max-connections bounds the client connections to the vhost across the cluster
(one more is refused with 530 NOT_ALLOWED at connection.open), max-queues the
queues in it (one more is refused with 406 PRECONDITION_FAILED at
queue.declare). 0 allows none; a negative value, or a limit not named, is no
limit. Connections and queues already over a new limit stay.`,
		setup: setVhostLimits,
	}, &command{
		name:    "clear vhost-limits",
		summary: "remove a vhost's limits",
		help:    `Removes every limit of --vhost, as rabbitmqctl clear_vhost_limits.`,
		setup:   clearVhostLimits,
	}, &command{
		name:    "list vhost-limits",
		summary: "the limits of a vhost, or of every vhost that has some",
		help: `Lists the limits of --vhost, or with --global of every vhost that has any, as
rabbitmqctl list_vhost_limits.`,
		setup: listVhostLimits,
	}, &command{
		name:    "set user-limits",
		args:    []string{"USER", "DEFINITION"},
		summary: "limit a user's connections and channels",
		help: `Replaces the limits of USER with DEFINITION, a JSON object as rabbitmqctl
set_user_limits takes it: {"max-connections": 10, "max-channels": 100}.
max-connections bounds the user's client connections across the cluster (one
more is refused with 530 NOT_ALLOWED at connection.open), max-channels the
channels on them (one more closes the connection that opens it with 530
NOT_ALLOWED, as in RabbitMQ). 0 allows none; a negative value, or a limit not
named, is no limit.`,
		setup: setUserLimits,
	}, &command{
		name:    "clear user-limits",
		args:    []string{"USER", "LIMIT"},
		summary: "remove one of a user's limits, or all",
		help:    `Removes USER's limit LIMIT (max-connections or max-channels), or every one for all, as rabbitmqctl clear_user_limits.`,
		setup:   clearUserLimits,
	}, &command{
		name:    "list user-limits",
		summary: "the limits of a user, or of every user that has some",
		help:    `Lists the limits of --user, or with --global of every user that has any, as rabbitmqctl list_user_limits.`,
		setup:   listUserLimits,
	})
}

func setUserLimits(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		if _, err := c.SetUserLimits(ctx, &adminpb.SetUserLimitsRequest{User: args[0], Definition: args[1]}); err != nil {
			return nil, err
		}
		return done("Set the limits of user '%s' to %s.", args[0], args[1]), nil
	}
}

func clearUserLimits(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		if _, err := c.ClearUserLimits(ctx, &adminpb.ClearUserLimitsRequest{User: args[0], Limit: args[1]}); err != nil {
			return nil, err
		}
		if args[1] == "all" {
			return done("Cleared every limit of user '%s'.", args[0]), nil
		}
		return done("Cleared limit %s of user '%s'.", args[1], args[0]), nil
	}
}

func listUserLimits(fs *flag.FlagSet) body {
	user := fs.String("user", "guest", "the `user`")
	global := fs.Bool("global", false, "every user that has limits")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ListUsers(ctx, &adminpb.ListUsersRequest{})
		if err != nil {
			return nil, err
		}
		r := &limitsReport{kind: "USER", Limits: []limitsRow{}}
		for _, u := range resp.Users {
			r.add(*global, u.Name == *user, limitsRow{User: u.Name, Limits: u.Limits})
		}
		return r, nil
	}
}

func setVhostLimits(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the `vhost`")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		if _, err := c.SetVhostLimits(ctx, &adminpb.SetVhostLimitsRequest{Vhost: *vhost, Definition: args[0]}); err != nil {
			return nil, err
		}
		return done("Set the limits of vhost '%s' to %s.", *vhost, args[0]), nil
	}
}

func clearVhostLimits(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the `vhost`")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		if _, err := c.ClearVhostLimits(ctx, &adminpb.VhostRequest{Name: *vhost}); err != nil {
			return nil, err
		}
		return done("Cleared the limits of vhost '%s'.", *vhost), nil
	}
}

// limitsReport is list vhost-limits' or list user-limits' answer.
type limitsReport struct {
	Limits []limitsRow `json:"limits"`
	kind   string      // VHOST or USER, for the text table
}

// limitsRow is one vhost's or one user's limits.
type limitsRow struct {
	Vhost  string           `json:"vhost,omitempty"`
	User   string           `json:"user,omitempty"`
	Limits map[string]int64 `json:"limits"`
}

// add lists row if it is the one asked for, or, for global, if it has
// limits.
func (r *limitsReport) add(global, asked bool, row limitsRow) {
	if (global && len(row.Limits) > 0) || (!global && asked) {
		if row.Limits == nil {
			row.Limits = map[string]int64{}
		}
		r.Limits = append(r.Limits, row)
	}
}

func listVhostLimits(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the `vhost`")
	global := fs.Bool("global", false, "every vhost that has limits")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ListVhosts(ctx, &adminpb.ListVhostsRequest{})
		if err != nil {
			return nil, err
		}
		r := &limitsReport{kind: "VHOST", Limits: []limitsRow{}}
		for _, v := range resp.Vhosts {
			r.add(*global, v.Name == *vhost, limitsRow{Vhost: v.Name, Limits: v.Limits})
		}
		return r, nil
	}
}

func (r *limitsReport) writeText(w io.Writer) {
	var rows [][]string
	for _, l := range r.Limits {
		b, _ := json.Marshal(l.Limits) // sorted keys
		rows = append(rows, []string{l.Vhost + l.User, string(b)})
	}
	table(w, []string{r.kind, "LIMITS"}, rows)
}
