package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Users, vhosts and permissions, as rabbitmqctl's add_user, delete_user,
// change_password, set_user_tags, list_users, add_vhost, delete_vhost,
// list_vhosts, set_permissions, clear_permissions and list_permissions.

var accessCommands = []*command{
	{
		name:    "add user",
		args:    []string{"NAME", "PASSWORD"},
		summary: "create a user",
		help: `Creates user NAME with PASSWORD (stored as RabbitMQ stores it: a salted
SHA-256 hash), and --tags if given, as rabbitmqctl add_user. The user may
not use any vhost until 'warrenctl set permissions' grants it one. Refused if
the user exists.`,
		setup: addUser,
	},
	{
		name:    "delete user",
		args:    []string{"NAME"},
		summary: "delete a user, its permissions and its connections",
		help: `Deletes user NAME and its permissions, as rabbitmqctl delete_user; its client
connections on every node are closed (320 CONNECTION_FORCED, "user 'NAME' is
deleted").`,
		setup: userChange("delete"),
	},
	{
		name:    "change password",
		args:    []string{"NAME", "PASSWORD"},
		summary: "replace a user's password",
		help:    `Replaces the password of user NAME, as rabbitmqctl change_password. Open connections stay open; new logins need the new password.`,
		setup:   userChange("password"),
	},
	{
		name:    "set user-tags",
		args:    []string{"NAME", "TAGS"},
		summary: "replace a user's tags",
		help:    `Replaces the tags of user NAME with TAGS, comma-separated (administrator,monitoring; "" for none), as rabbitmqctl set_user_tags.`,
		setup:   userChange("tags"),
	},
	{
		name:    "list users",
		summary: "the users and their tags",
		help:    `Lists the users, as rabbitmqctl list_users: name and tags.`,
		setup:   listUsers,
	},
	{
		name:    "add vhost",
		args:    []string{"NAME"},
		summary: "create a vhost",
		help: `Creates vhost NAME, as rabbitmqctl add_vhost. Its durable queues declared
without x-queue-type get --default-queue-type (the node's own default,
quorum, if not given). No user may use it until 'warrenctl set permissions'
grants one access. Refused if the vhost exists.`,
		setup: addVhost,
	},
	{
		name:    "delete vhost",
		args:    []string{"NAME"},
		summary: "delete a vhost and everything in it",
		help: `Deletes vhost NAME with everything in it, as rabbitmqctl delete_vhost: its
queues and their messages (a quorum queue's Raft group on every member),
exchanges, bindings, policies and permissions; its client connections on
every node are closed (320 CONNECTION_FORCED, "vhost 'NAME' is deleted").
There is no undo.`,
		setup: deleteVhost,
	},
	{
		name:    "list vhosts",
		summary: "the vhosts and their default queue types",
		help:    `Lists the vhosts, as rabbitmqctl list_vhosts, with the queue type durable queues declared without x-queue-type get there.`,
		setup:   listVhosts,
	},
	{
		name:    "set permissions",
		args:    []string{"USER", "CONFIGURE", "WRITE", "READ"},
		summary: "grant a user access to a vhost",
		help: `Grants USER access to --vhost, replacing what it had there, as rabbitmqctl
set_permissions: CONFIGURE, WRITE and READ are regular expressions matched
against the names of the queues and exchanges it may declare and delete,
publish to (or bind to), and consume from (or bind from). ".*" is everything,
"" nothing. Takes effect at once, for open connections too.`,
		setup: setPermissions,
	},
	{
		name:    "clear permissions",
		args:    []string{"USER"},
		summary: "take a user's access to a vhost away",
		help: `Takes USER's access to --vhost away, as rabbitmqctl clear_permissions: no new
connection of USER opens the vhost, and its open ones there are refused every
operation that needs a permission (403 ACCESS_REFUSED).`,
		setup: clearPermissions,
	},
	{
		name:    "list permissions",
		summary: "who may do what in which vhost",
		help:    `Lists the permissions, as rabbitmqctl list_permissions (of --vhost) and list_user_permissions (of --user): user, vhost and the configure, write and read patterns.`,
		setup:   listPermissions,
	},
}

func init() { commands = append(commands, accessCommands...) }

// doneReport is the answer to a change: one sentence.
type doneReport struct {
	Done string `json:"done"`
}

func (r *doneReport) writeText(w io.Writer) { fmt.Fprintln(w, r.Done) }

func done(format string, args ...any) *doneReport {
	return &doneReport{Done: fmt.Sprintf(format, args...)}
}

func splitTags(s string) []string {
	var tags []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

func addUser(fs *flag.FlagSet) body {
	tags := fs.String("tags", "", "comma-separated `tags` (administrator, monitoring, management, ...)")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		if _, err := c.AddUser(ctx, &adminpb.AddUserRequest{Name: args[0], Password: args[1], Tags: splitTags(*tags)}); err != nil {
			return nil, err
		}
		return done("Added user '%s'.", args[0]), nil
	}
}

func userChange(what string) func(*flag.FlagSet) body {
	return func(*flag.FlagSet) body {
		return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
			var err error
			var msg string
			switch what {
			case "delete":
				_, err = c.DeleteUser(ctx, &adminpb.UserRequest{Name: args[0]})
				msg = "Deleted user '%s'."
			case "password":
				_, err = c.ChangePassword(ctx, &adminpb.ChangePasswordRequest{Name: args[0], Password: args[1]})
				msg = "Changed the password of user '%s'."
			case "tags":
				_, err = c.SetUserTags(ctx, &adminpb.SetUserTagsRequest{Name: args[0], Tags: splitTags(args[1])})
				msg = "Set the tags of user '%s'."
			}
			if err != nil {
				return nil, err
			}
			return done(msg, args[0]), nil
		}
	}
}

type usersReport struct {
	Users []userReport `json:"users"`
}

type userReport struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

func listUsers(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ListUsers(ctx, &adminpb.ListUsersRequest{})
		if err != nil {
			return nil, err
		}
		r := &usersReport{Users: []userReport{}}
		for _, u := range resp.Users {
			r.Users = append(r.Users, userReport{Name: u.Name, Tags: nonNil(u.Tags)})
		}
		return r, nil
	}
}

func (r *usersReport) writeText(w io.Writer) {
	var rows [][]string
	for _, u := range r.Users {
		rows = append(rows, []string{u.Name, orDash(strings.Join(u.Tags, ","))})
	}
	table(w, []string{"USER", "TAGS"}, rows)
}

func addVhost(fs *flag.FlagSet) body {
	qt := fs.String("default-queue-type", "", "`type` of durable queues declared without x-queue-type: quorum or classic (default: the node's)")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		if _, err := c.AddVhost(ctx, &adminpb.AddVhostRequest{Name: args[0], DefaultQueueType: *qt}); err != nil {
			return nil, err
		}
		return done("Added vhost '%s'.", args[0]), nil
	}
}

func deleteVhost(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		if _, err := c.DeleteVhost(ctx, &adminpb.VhostRequest{Name: args[0]}); err != nil {
			return nil, err
		}
		return done("Deleted vhost '%s' and everything in it.", args[0]), nil
	}
}

type vhostsReport struct {
	Vhosts []vhostReport `json:"vhosts"`
}

type vhostReport struct {
	Name             string `json:"name"`
	DefaultQueueType string `json:"default_queue_type"`
}

func listVhosts(*flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ListVhosts(ctx, &adminpb.ListVhostsRequest{})
		if err != nil {
			return nil, err
		}
		r := &vhostsReport{Vhosts: []vhostReport{}}
		for _, v := range resp.Vhosts {
			r.Vhosts = append(r.Vhosts, vhostReport{Name: v.Name, DefaultQueueType: v.DefaultQueueType})
		}
		return r, nil
	}
}

func (r *vhostsReport) writeText(w io.Writer) {
	var rows [][]string
	for _, v := range r.Vhosts {
		rows = append(rows, []string{v.Name, orDash(v.DefaultQueueType)})
	}
	table(w, []string{"VHOST", "DEFAULT QUEUE TYPE"}, rows)
}

func setPermissions(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the `vhost`")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		p := &adminpb.Permission{User: args[0], Vhost: *vhost, Configure: args[1], Write: args[2], Read: args[3]}
		if _, err := c.SetPermissions(ctx, p); err != nil {
			return nil, err
		}
		return done("Set the permissions of user '%s' in vhost '%s'.", args[0], *vhost), nil
	}
}

func clearPermissions(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the `vhost`")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		if _, err := c.ClearPermissions(ctx, &adminpb.ClearPermissionsRequest{User: args[0], Vhost: *vhost}); err != nil {
			return nil, err
		}
		return done("Cleared the permissions of user '%s' in vhost '%s'.", args[0], *vhost), nil
	}
}

type permissionsReport struct {
	Permissions []permissionReport `json:"permissions"`
}

type permissionReport struct {
	User      string `json:"user"`
	Vhost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

func listPermissions(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "", "only this `vhost`'s (default: every vhost)")
	user := fs.String("user", "", "only this `user`'s (default: every user)")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ListPermissions(ctx, &adminpb.ListPermissionsRequest{Vhost: *vhost, User: *user})
		if err != nil {
			return nil, err
		}
		r := &permissionsReport{Permissions: []permissionReport{}}
		for _, p := range resp.Permissions {
			r.Permissions = append(r.Permissions, permissionReport{User: p.User, Vhost: p.Vhost, Configure: p.Configure, Write: p.Write, Read: p.Read})
		}
		return r, nil
	}
}

func (r *permissionsReport) writeText(w io.Writer) {
	quote := func(s string) string { return "'" + s + "'" } // "" grants nothing, and shows so
	var rows [][]string
	for _, p := range r.Permissions {
		rows = append(rows, []string{p.Vhost, p.User, quote(p.Configure), quote(p.Write), quote(p.Read)})
	}
	table(w, []string{"VHOST", "USER", "CONFIGURE", "WRITE", "READ"}, rows)
}
