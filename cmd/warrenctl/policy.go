package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Policies and operator policies: set, clear, list, as rabbitmqctl's
// set_policy, clear_policy, list_policies and their operator_policy twins.

var policyCommands = []*command{
	{
		name:    "set policy",
		args:    []string{"NAME", "PATTERN", "DEFINITION"},
		summary: "create or replace a policy",
		help: `Sets policy NAME in a vhost, as rabbitmqctl set_policy does: the keys of
DEFINITION (a JSON object, e.g. '{"max-length":10,"overflow":"reject-publish"}')
apply to the queues and exchanges whose names match PATTERN (a regular
expression) and that --apply-to selects. Of the policies matching a queue or
exchange, the one with the highest --priority applies (between equal
priorities, the first name). Queues that exist are reconfigured. Answered
once the cluster has committed the policy; a definition RabbitMQ would refuse
is refused with its validation message.

Keys Warren applies to queues: max-length, max-length-bytes, overflow,
message-ttl, expires, delivery-limit, dead-letter-exchange,
dead-letter-routing-key, dead-letter-strategy, consumer-timeout,
queue-leader-locator; to exchanges: alternate-exchange.`,
		setup: func(fs *flag.FlagSet) body { return setPolicy(fs, false) },
	},
	{
		name:    "clear policy",
		args:    []string{"NAME"},
		summary: "delete a policy",
		help:    `Deletes policy NAME of a vhost, as rabbitmqctl clear_policy does; the queues and exchanges it applied to go back to their own arguments (or to another matching policy).`,
		setup:   func(fs *flag.FlagSet) body { return clearPolicy(fs, false) },
	},
	{
		name:    "list policies",
		summary: "the policies of a vhost, or of every vhost",
		help:    `Lists the policies of one vhost (--vhost) or of every vhost, lowest priority first, as rabbitmqctl list_policies does.`,
		setup:   func(fs *flag.FlagSet) body { return listPolicies(fs, false) },
	},
	{
		name:    "set operator-policy",
		args:    []string{"NAME", "PATTERN", "DEFINITION"},
		summary: "create or replace an operator policy",
		help: `Sets operator policy NAME, as rabbitmqctl set_operator_policy does. Operator
policies apply next to the (user) policy that matches: for expires,
message-ttl, max-length, max-length-bytes and delivery-limit the lower of the
two values applies, and then the lower of that and the queue's own argument;
for overflow the operator's value. Only those keys (and max-in-memory-length,
max-in-memory-bytes, queue-version) may be set. Answered once committed.`,
		setup: func(fs *flag.FlagSet) body { return setPolicy(fs, true) },
	},
	{
		name:    "clear operator-policy",
		args:    []string{"NAME"},
		summary: "delete an operator policy",
		help:    `Deletes operator policy NAME of a vhost, as rabbitmqctl clear_operator_policy does.`,
		setup:   func(fs *flag.FlagSet) body { return clearPolicy(fs, true) },
	},
	{
		name:    "list operator-policies",
		summary: "the operator policies of a vhost, or of every vhost",
		help:    `Lists the operator policies of one vhost (--vhost) or of every vhost, lowest priority first.`,
		setup:   func(fs *flag.FlagSet) body { return listPolicies(fs, true) },
	},
}

func init() { commands = append(commands, policyCommands...) }

func policyKind(operator bool) string {
	if operator {
		return "operator policy"
	}
	return "policy"
}

type policyReport struct {
	Vhost      string `json:"vhost"`
	Name       string `json:"name"`
	Pattern    string `json:"pattern"`
	ApplyTo    string `json:"apply_to"`
	Definition string `json:"definition"` // a JSON object
	Priority   int32  `json:"priority"`
	Operator   bool   `json:"operator"`
}

// policyDone is the answer of set and clear.
type policyDone struct {
	Action string        `json:"action"` // "set" or "cleared"
	Policy *policyReport `json:"policy"`
}

func (r *policyDone) writeText(w io.Writer) {
	p := r.Policy
	if r.Action == "cleared" {
		fmt.Fprintf(w, "Cleared %s '%s' in vhost '%s'.\n", policyKind(p.Operator), p.Name, p.Vhost)
		return
	}
	fmt.Fprintf(w, "Set %s '%s' in vhost '%s': pattern '%s', apply-to %s, priority %d, definition %s.\n",
		policyKind(p.Operator), p.Name, p.Vhost, p.Pattern, p.ApplyTo, p.Priority, p.Definition)
}

func setPolicy(fs *flag.FlagSet, operator bool) body {
	vhost := fs.String("vhost", "/", "the policy's `vhost`")
	priority := fs.Int("priority", 0, "the policy's `priority`: the highest of the matching policies applies")
	applyTo := fs.String("apply-to", "all", "what it applies to: `queues`, classic_queues, quorum_queues, streams, exchanges or all")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		p := &adminpb.Policy{Vhost: *vhost, Name: args[0], Pattern: args[1], Definition: args[2],
			Priority: int32(*priority), ApplyTo: *applyTo, Operator: operator}
		if _, err := c.SetPolicy(ctx, &adminpb.SetPolicyRequest{Policy: p}); err != nil {
			return nil, err
		}
		return &policyDone{Action: "set", Policy: reportOf(p)}, nil
	}
}

func clearPolicy(fs *flag.FlagSet, operator bool) body {
	vhost := fs.String("vhost", "/", "the policy's `vhost`")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		if _, err := c.ClearPolicy(ctx, &adminpb.ClearPolicyRequest{Vhost: *vhost, Name: args[0], Operator: operator}); err != nil {
			return nil, err
		}
		return &policyDone{Action: "cleared", Policy: &policyReport{Vhost: *vhost, Name: args[0], Operator: operator}}, nil
	}
}

type policiesReport struct {
	Vhost    string         `json:"vhost,omitempty"` // empty: every vhost
	Operator bool           `json:"operator"`
	Policies []policyReport `json:"policies"`
}

func listPolicies(fs *flag.FlagSet, operator bool) body {
	vhost := fs.String("vhost", "", "only this `vhost`'s policies (default: every vhost)")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ListPolicies(ctx, &adminpb.ListPoliciesRequest{Vhost: *vhost, Operator: operator})
		if err != nil {
			return nil, err
		}
		r := &policiesReport{Vhost: *vhost, Operator: operator, Policies: []policyReport{}}
		for _, p := range resp.Policies {
			r.Policies = append(r.Policies, *reportOf(p))
		}
		return r, nil
	}
}

func reportOf(p *adminpb.Policy) *policyReport {
	return &policyReport{Vhost: p.Vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
		Definition: p.Definition, Priority: p.Priority, Operator: p.Operator}
}

func (r *policiesReport) writeText(w io.Writer) {
	if len(r.Policies) == 0 {
		kind := "policies"
		if r.Operator {
			kind = "operator policies"
		}
		if r.Vhost != "" {
			fmt.Fprintf(w, "No %s in vhost '%s'.\n", kind, r.Vhost)
		} else {
			fmt.Fprintf(w, "No %s.\n", kind)
		}
		return
	}
	var rows [][]string
	for _, p := range r.Policies {
		rows = append(rows, []string{p.Vhost, p.Name, p.Pattern, p.ApplyTo, p.Definition, strconv.Itoa(int(p.Priority))})
	}
	table(w, []string{"VHOST", "NAME", "PATTERN", "APPLY-TO", "DEFINITION", "PRIORITY"}, rows)
}
