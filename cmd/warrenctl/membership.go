package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Membership operations, as rabbitmq-queues add_member, delete_member,
// grow and shrink.

var membershipCommands = []*command{
	{
		name:    "add member",
		args:    []string{"QUEUE", "NODE"},
		summary: "add a replica of a quorum queue on NODE",
		help: `Adds a replica of quorum queue QUEUE on NODE: it joins the queue's Raft group
as a non-voter, receives the log (or a snapshot carrying the live messages),
and is promoted to voter once caught up. Answered after the promotion. The
queue keeps serving publishes and consumers throughout. With --membership
voter (as rabbitmq-queues') it is promoted at once, and the queue's majority
counts it while it catches up: a queue of one member grown to two confirms
nothing until the new member has the log.`,
		setup:   addMember,
		timeout: 2 * time.Minute,
	},
	{
		name:    "delete member",
		args:    []string{"QUEUE", "NODE"},
		summary: "remove a quorum queue's replica from NODE",
		help: `Removes quorum queue QUEUE's replica on NODE from its Raft group (moving the
leadership away first if NODE leads) and deletes it from NODE. Refused when the
queue would be left with fewer members than a majority of its target size
(x-quorum-initial-group-size, 3 by default) unless --force is given, and always
for the last member.`,
		setup:   deleteMember,
		timeout: 2 * time.Minute,
	},
	{
		name:     "grow",
		args:     []string{"NODE"},
		optional: []string{"all|even"},
		summary:  "add NODE to every quorum queue with fewer members than its target",
		help: `Adds a replica on NODE to every quorum queue that has fewer members than its
target size (its x-quorum-target-group-size or target-group-size policy, else
its initial group size) and none on NODE yet, one queue at a time. With all,
to every quorum queue without one on NODE; with even, to those with an even
number of members (so that they reach an odd size): rabbitmq-queues grow's
two strategies. --vhost-pattern and --queue-pattern (regular expressions)
select the queues; new members join as --membership says (see add member).
Lists the queues changed and those that could not be; exits 1 if any could
not.`,
		setup:   grow,
		timeout: 30 * time.Minute,
	},
	{
		name:     "grow to-count",
		args:     []string{"COUNT"},
		optional: []string{"all|even"},
		summary:  "add members to every quorum queue until it has COUNT",
		help: `Adds replicas to every quorum queue that matches --vhost-pattern and
--queue-pattern until it has COUNT members, as rabbitmq-queues grow_to_count:
never more than the nodes replicas can be placed on (alive and not drained).
Each new member goes on the node without one that holds the fewest replicas,
and joins as add member's do (--membership). With even (as
RabbitMQ's), only queues with an even number of members grow, by one; all,
the default, grows every matching queue. Lists each member added and the
queues that could not grow; exits 1 if any could not.`,
		setup:   growToCount,
		timeout: 30 * time.Minute,
	},
	{
		name:    "shrink",
		args:    []string{"NODE"},
		summary: "remove NODE's replicas from every quorum queue",
		help: `Removes NODE's replica from every quorum queue that has another member, as
rabbitmq-queues shrink does (for a node being retired). Lists the queues
changed and those that could not be; exits 1 if any could not.`,
		setup:   shrink,
		timeout: 30 * time.Minute,
	},
}

func init() { commands = append(commands, append(membershipCommands, checkpointCommand)...) }

type membershipReport struct {
	Operation string `json:"operation"`
	// Node is the node named, or grow to-count's COUNT.
	Node    string   `json:"node"`
	Changed []string `json:"changed"`
	Failed  []string `json:"failed"`
	// AddedOn is grow to-count's node of each member in Changed.
	AddedOn []string `json:"added_on,omitempty"`
}

func newMembershipReport(op, node string, resp *adminpb.MembershipResponse) *membershipReport {
	r := &membershipReport{Operation: op, Node: node, Changed: resp.Changed, Failed: resp.Failed}
	if r.Changed == nil {
		r.Changed = []string{}
	}
	if r.Failed == nil {
		r.Failed = []string{}
	}
	return r
}

func (r *membershipReport) failed() bool { return len(r.Failed) > 0 }

func (r *membershipReport) writeText(w io.Writer) {
	verb := map[string]string{"add member": "Added a replica on", "delete member": "Removed the replica on",
		"grow": "Added a replica on", "grow to-count": "Added a replica on", "shrink": "Removed the replica on"}[r.Operation]
	if len(r.Changed) == 0 && len(r.Failed) == 0 {
		if r.Operation == "grow to-count" {
			fmt.Fprintf(w, "No queue to grow to %s members.\n", r.Node)
		} else {
			fmt.Fprintf(w, "No queue to change for %s.\n", r.Node)
		}
		return
	}
	for i, q := range r.Changed {
		node := r.Node
		if i < len(r.AddedOn) { // grow to-count: a node per member
			node = r.AddedOn[i]
		}
		fmt.Fprintf(w, "%s %s for queue %s.\n", verb, node, q)
	}
	for _, f := range r.Failed {
		fmt.Fprintf(w, "Could not change %s\n", f)
	}
}

// membershipFlag defines --membership, how a new member joins, as
// rabbitmq-queues' (the node checks the value).
func membershipFlag(fs *flag.FlagSet) *string {
	return fs.String("membership", "promotable", "how a new member joins: promotable (a non-voter until it has caught up, then a voter) or voter (a voter at once)")
}

func addMember(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the queue's `vhost`")
	membership := membershipFlag(fs)
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.AddMember(ctx, &adminpb.AddMemberRequest{Vhost: *vhost, Name: args[0], Node: args[1], Membership: *membership})
		if err != nil {
			return nil, err
		}
		return newMembershipReport("add member", args[1], resp), nil
	}
}

func deleteMember(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the queue's `vhost`")
	force := fs.Bool("force", false, "remove the member even if fewer than a majority of the target size remain")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.DeleteMember(ctx, &adminpb.DeleteMemberRequest{Vhost: *vhost, Name: args[0], Node: args[1], Force: *force})
		if err != nil {
			return nil, err
		}
		return newMembershipReport("delete member", args[1], resp), nil
	}
}

// growRequest defines grow's pattern flags on fs and returns what builds
// the request from them and the optional strategy argument after the first.
func growRequest(fs *flag.FlagSet) func(args []string) (*adminpb.GrowRequest, error) {
	vhosts := fs.String("vhost-pattern", "", "only vhosts matching this regular `expression` (default: all)")
	queues := fs.String("queue-pattern", "", "only queues whose name matches this regular `expression` (default: all)")
	membership := membershipFlag(fs)
	return func(args []string) (*adminpb.GrowRequest, error) {
		req := &adminpb.GrowRequest{VhostPattern: *vhosts, QueuePattern: *queues, Membership: *membership}
		if len(args) > 1 {
			if args[1] != "all" && args[1] != "even" {
				return nil, fmt.Errorf("strategy '%s' is not recognised (all or even)", args[1])
			}
			req.Strategy = args[1]
		}
		return req, nil
	}
}

func grow(fs *flag.FlagSet) body {
	request := growRequest(fs)
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		req, err := request(args)
		if err != nil {
			return nil, err
		}
		req.Node = args[0]
		resp, err := c.Grow(ctx, req)
		if err != nil {
			return nil, err
		}
		return newMembershipReport("grow", args[0], resp), nil
	}
}

func growToCount(fs *flag.FlagSet) body {
	request := growRequest(fs)
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		count, err := strconv.Atoi(args[0])
		if err != nil || count < 1 {
			return nil, fmt.Errorf("node count '%s' must be an integer greater than 0", args[0])
		}
		req, err := request(args)
		if err != nil {
			return nil, err
		}
		req.Count = uint32(count)
		resp, err := c.Grow(ctx, req)
		if err != nil {
			return nil, err
		}
		r := newMembershipReport("grow to-count", args[0], resp)
		r.AddedOn = resp.AddedOn
		return r, nil
	}
}

func shrink(fs *flag.FlagSet) body {
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.Shrink(ctx, &adminpb.ShrinkRequest{Node: args[0]})
		if err != nil {
			return nil, err
		}
		return newMembershipReport("shrink", args[0], resp), nil
	}
}
