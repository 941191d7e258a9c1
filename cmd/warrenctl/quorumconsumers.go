package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/warrenmq/warren/proto/adminpb"
)

// quorum consumers: a quorum queue's consumer records as its leader's
// state machine keeps them, the queue's side of list consumers.

func init() {
	commands = append(commands, &command{
		name:    "quorum consumers",
		args:    []string{"QUEUE"},
		summary: "a quorum queue's consumers as its leader sees them: status, messages held",
		help: `Lists the consumer records of a quorum queue's state machine, as its leader
has them (any node finds the leader and asks it): each consumer's STATUS (up:
competing for messages; single active; quiescing: the single active consumer,
receiving nothing while a higher-priority one waits for it; waiting: for its
turn as single active consumer; cancelled: detached, still holding messages
its channel may settle; basic.get: a channel's unsettled basic.get messages;
suspected down: its node's link to the leader broke, and what it holds waits
for it the consumer disconnected timeout, as RabbitMQ's suspected_down),
the messages it HOLDS, its CREDIT (its prefetch, or the queue's default of
2000 for a consumer without one or without acknowledgements) and priority.
NODE and TAG are the consuming channel's, known for consumers that attached
through the current leader (NODE also for one suspected down); ACK says
whether it acknowledges.

A consumer's HELD should match its channel's UNACKED (list channels) once
acknowledgements have arrived; messages held by a consumer whose channel is
gone return to the queue when the consumer's node is declared down.`,
		setup: quorumConsumers,
	})
}

type quorumConsumersReport struct {
	Vhost     string                `json:"vhost"`
	Queue     string                `json:"queue"`
	QueueID   string                `json:"queue_id"`
	Leader    string                `json:"leader"`
	Consumers []queueConsumerReport `json:"consumers"`
}

type queueConsumerReport struct {
	ID     uint64 `json:"id"`
	Status string `json:"status"`
	// Node, Tag and AckRequired are null for a consumer that did not
	// attach through the current leader (Node is known for one suspected
	// down).
	Node        *string `json:"node"`
	Tag         *string `json:"consumer_tag"`
	AckRequired *bool   `json:"ack_required"`
	Held        uint32  `json:"held"`
	Credit      uint32  `json:"credit"`
	Priority    int32   `json:"priority"`
	Exclusive   bool    `json:"exclusive"`
}

func quorumConsumers(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the queue's `vhost`")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		resp, err := c.QuorumConsumers(ctx, &adminpb.QuorumConsumersRequest{Vhost: *vhost, Name: args[0]})
		if err != nil {
			return nil, err
		}
		r := &quorumConsumersReport{Vhost: resp.Vhost, Queue: resp.Name, QueueID: resp.QueueId, Leader: resp.Leader,
			Consumers: []queueConsumerReport{}}
		for _, k := range resp.Consumers {
			qc := queueConsumerReport{ID: k.Id, Status: k.Status, Held: k.Held, Credit: k.Credit, Priority: k.Priority, Exclusive: k.Exclusive}
			if k.AttachedHere {
				qc.Node, qc.Tag, qc.AckRequired = &k.Node, &k.Tag, &k.AckRequired
			} else if k.Node != "" {
				qc.Node = &k.Node
			}
			r.Consumers = append(r.Consumers, qc)
		}
		return r, nil
	}
}

func (r *quorumConsumersReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Consumers of quorum queue '%s' in vhost '%s' (leader %s)\n", r.Queue, r.Vhost, r.Leader)
	if len(r.Consumers) == 0 {
		fmt.Fprintln(w, "None.")
		return
	}
	fmt.Fprintln(w)
	var rows [][]string
	for _, k := range r.Consumers {
		ack := "-"
		if k.AckRequired != nil {
			ack = strconv.FormatBool(*k.AckRequired)
		}
		rows = append(rows, []string{strconv.FormatUint(k.ID, 10), orDash(deref(k.Tag)), orDash(deref(k.Node)), k.Status,
			u32(k.Held), u32(k.Credit), strconv.Itoa(int(k.Priority)), ack, strconv.FormatBool(k.Exclusive)})
	}
	table(w, []string{"ID", "TAG", "NODE", "STATUS", "HELD", "CREDIT", "PRIORITY", "ACK", "EXCLUSIVE"}, rows)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
