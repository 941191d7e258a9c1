package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/warrenmq/warren/proto/adminpb"
)

// force checkpoint, as rabbitmq-queues force_checkpoint; listed after the
// membership commands (membership.go), beside them in RabbitMQ's help.
var checkpointCommand = &command{
	name:    "force checkpoint",
	summary: "every member of the matching quorum queues snapshots its state now",
	help: `Has every member of each quorum queue that matches --vhost-pattern and
--queue-pattern (regular expressions, every queue by default) take a snapshot
of its state now, as rabbitmq-queues force_checkpoint. Raft then drops the log
before it (but for 1,024 trailing entries and the entries of messages still in
the queue): a restart replays less, and the node's log gives disk space back
sooner. Members snapshot on their own every few tens of thousands of entries;
this is for before a planned restart, or to reclaim disk after a burst.

A hibernating queue wakes for it and sleeps again once idle. Lists each
member's snapshot index afterwards; a member that could not take one is shown
with the reason, and the command exits 1. --errors-only lists only those.`,
	setup:   forceCheckpoint,
	timeout: 30 * time.Minute,
}

type checkpointReport struct {
	Queues     []checkpointQueue `json:"queues"`
	errorsOnly bool
}

type checkpointQueue struct {
	Vhost   string         `json:"vhost"`
	Name    string         `json:"name"`
	Members []memberReport `json:"members"`
}

func forceCheckpoint(fs *flag.FlagSet) body {
	vhosts := fs.String("vhost-pattern", "", "only vhosts matching this regular `expression` (default: all)")
	queues := fs.String("queue-pattern", "", "only queues whose name matches this regular `expression` (default: all)")
	errorsOnly := fs.Bool("errors-only", false, "list only the members that could not take a checkpoint")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ForceCheckpoint(ctx, &adminpb.ForceCheckpointRequest{VhostPattern: *vhosts, QueuePattern: *queues})
		if err != nil {
			return nil, err
		}
		r := &checkpointReport{Queues: []checkpointQueue{}, errorsOnly: *errorsOnly}
		for _, q := range resp.Queues {
			cq := checkpointQueue{Vhost: q.Vhost, Name: q.Name, Members: []memberReport{}}
			for _, m := range q.Members {
				if *errorsOnly && m.Error == "" {
					continue
				}
				cq.Members = append(cq.Members, newMemberReport(m))
			}
			if len(cq.Members) > 0 || !*errorsOnly {
				r.Queues = append(r.Queues, cq)
			}
		}
		return r, nil
	}
}

// failed makes warrenctl exit 1 when a member took no checkpoint.
func (r *checkpointReport) failed() bool {
	for _, q := range r.Queues {
		for _, m := range q.Members {
			if m.Error != "" {
				return true
			}
		}
	}
	return false
}

func (r *checkpointReport) writeText(w io.Writer) {
	if len(r.Queues) == 0 {
		if r.errorsOnly {
			fmt.Fprintln(w, "Every member took its checkpoint.")
		} else {
			fmt.Fprintln(w, "No quorum queue matches.")
		}
		return
	}
	var rows [][]string
	for _, q := range r.Queues {
		for _, m := range q.Members {
			result := "ok"
			if m.Error != "" {
				result = "error: " + m.Error
			}
			rows = append(rows, []string{q.Vhost, q.Name, m.Node, u64p(m.SnapshotIndex), result})
		}
	}
	table(w, []string{"VHOST", "QUEUE", "NODE", "SNAPSHOT", "RESULT"}, rows)
}
