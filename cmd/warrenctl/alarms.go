package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Resource alarms, as rabbitmq-diagnostics alarms, check_alarms and
// check_local_alarms, and the watermarks behind them, as rabbitmqctl
// set_vm_memory_high_watermark and set_disk_free_limit.

var alarmCommands = []*command{
	{
		name:    "list alarms",
		summary: "resource alarms in effect across the cluster, and the node's watermarks",
		help: `Lists the resource alarms in effect on any node, as the answering node knows
them (each node gossips its own): a memory alarm (it uses more memory than
its memory high watermark) or a disk alarm (the file
system of its data directory has less free space than its disk free limit).
While any node has an alarm in effect, every node of the cluster blocks its
publishing connections (connection.blocked; their sockets go unread) and
consumers carry on. Below the list: the answering node's use and watermarks.`,
		setup: showAlarms(""),
	},
	{
		name:    "check alarms",
		summary: "fails if a resource alarm is in effect on any node",
		help: `Passes (exit status 0) if no node has a resource alarm in effect; otherwise
lists them and exits with status 1, as rabbitmq-diagnostics check_alarms.`,
		setup: showAlarms("alarms"),
	},
	{
		name:    "check local-alarms",
		summary: "fails if a resource alarm is in effect on the answering node",
		help: `Passes (exit status 0) if the answering node (--node) has no resource alarm in
effect; otherwise lists them and exits with status 1, as rabbitmq-diagnostics
check_local_alarms.`,
		setup: showAlarms("local-alarms"),
	},
	{
		name:    "set memory-high-watermark",
		args:    []string{"VALUE"},
		summary: "change the answering node's memory high watermark until it stops",
		help: `Sets the answering node's memory high watermark, as rabbitmqctl
set_vm_memory_high_watermark: VALUE is a fraction of the node's RAM (0.4) or
an amount (1073741824, 1GiB, 800MB); 0 disables the memory alarm. The alarm
follows at once. The setting lasts until the node stops; --memory-high-watermark
sets it from the start.`,
		setup: setWatermark("memory"),
	},
	{
		name:    "set disk-free-limit",
		args:    []string{"VALUE"},
		summary: "change the answering node's disk free limit until it stops",
		help: `Sets the answering node's disk free limit, as rabbitmqctl set_disk_free_limit:
VALUE is an amount (50MB, 2GiB, 1000000000) or mem_relative:F (F times the
node's RAM); 0 disables the disk alarm. The node looks at its free space at
once and raises or clears its alarm accordingly. The setting lasts until the
node stops; --disk-free-limit sets it from the start.`,
		setup: setWatermark("disk"),
	},
}

func init() { commands = append(commands, alarmCommands...) }

type alarmsReport struct {
	Node string `json:"node"` // the node that answered
	// Check is "alarms" or "local-alarms" for a check, empty for a
	// listing; Passed is whether it passed (no alarm of its scope).
	Check  string        `json:"check,omitempty"`
	Passed bool          `json:"passed"`
	Alarms []alarmReport `json:"alarms"`
	// The answering node's use and watermarks (0: none; DiskFree -1:
	// unknown).
	MemoryUsed    int64 `json:"memory_used_bytes"`
	MemoryHeld    int64 `json:"memory_message_bytes"`
	MemoryLimit   int64 `json:"memory_limit_bytes"`
	DiskFree      int64 `json:"disk_free_bytes"`
	DiskFreeLimit int64 `json:"disk_free_limit_bytes"`
}

type alarmReport struct {
	Node     string `json:"node"`
	Resource string `json:"resource"`
}

func alarmsReportOf(resp *adminpb.AlarmsResponse, check string, localOnly bool) *alarmsReport {
	r := &alarmsReport{Node: resp.Node, Check: check, Alarms: []alarmReport{},
		MemoryUsed: resp.MemoryUsedBytes, MemoryHeld: resp.MemoryMessageBytes, MemoryLimit: resp.MemoryLimitBytes,
		DiskFree: resp.DiskFreeBytes, DiskFreeLimit: resp.DiskFreeLimitBytes}
	for _, a := range resp.Alarms {
		if !localOnly || a.Node == resp.Node {
			r.Alarms = append(r.Alarms, alarmReport{Node: a.Node, Resource: a.Resource})
		}
	}
	r.Passed = len(r.Alarms) == 0
	return r
}

// showAlarms lists the alarms: all of them for a listing (check "") or the
// "alarms" check, the answering node's for the "local-alarms" check.
func showAlarms(check string) func(*flag.FlagSet) body {
	return func(*flag.FlagSet) body {
		return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
			resp, err := c.Alarms(ctx, &adminpb.AlarmsRequest{})
			if err != nil {
				return nil, err
			}
			return alarmsReportOf(resp, check, check == "local-alarms"), nil
		}
	}
}

func setWatermark(resource string) func(*flag.FlagSet) body {
	return func(*flag.FlagSet) body {
		return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
			resp, err := c.SetWatermark(ctx, &adminpb.SetWatermarkRequest{Resource: resource, Value: args[0]})
			if err != nil {
				return nil, err
			}
			return alarmsReportOf(resp, "", false), nil
		}
	}
}

// failed: a check fails when it finds an alarm; a listing never does.
func (r *alarmsReport) failed() bool { return r.Check != "" && !r.Passed }

func (r *alarmsReport) writeText(w io.Writer) {
	switch {
	case r.Check == "local-alarms" && r.Passed:
		fmt.Fprintf(w, "Node %s has no resource alarm in effect.\n", r.Node)
	case len(r.Alarms) == 0:
		fmt.Fprintf(w, "No resource alarm is in effect (as node %s sees the cluster).\n", r.Node)
	default:
		where := "across the cluster"
		if r.Check == "local-alarms" {
			where = "on node " + r.Node
		}
		fmt.Fprintf(w, "%d resource alarm(s) in effect %s: publishers are blocked on every node.\n\n", len(r.Alarms), where)
		var rows [][]string
		for _, a := range r.Alarms {
			rows = append(rows, []string{a.Node, a.Resource})
		}
		table(w, []string{"NODE", "RESOURCE"}, rows)
	}
	if r.Check != "" {
		return
	}
	fmt.Fprintf(w, "\nNode %s:\n", r.Node)
	memLimit := "none"
	if r.MemoryLimit > 0 {
		memLimit = bytesText(r.MemoryLimit)
	}
	fmt.Fprintf(w, "  memory: %s used, %s of it messages in classic queues, high watermark %s\n", bytesText(r.MemoryUsed), bytesText(r.MemoryHeld), memLimit)
	free, diskLimit := "unknown", "none"
	if r.DiskFree >= 0 {
		free = bytesText(r.DiskFree)
	}
	if r.DiskFreeLimit > 0 {
		diskLimit = bytesText(r.DiskFreeLimit)
	}
	fmt.Fprintf(w, "  disk: %s free, limit %s\n", free, diskLimit)
}

// bytesText is n bytes for a reader: "52.4 MB (52428800 bytes)".
func bytesText(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB (%d bytes)", float64(n)/float64(div), "kMGTPE"[exp], n)
}
