package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/warrenmq/warren/proto/adminpb"
)

// status and check running: the asked node's own state, as
// rabbitmq-diagnostics status and check_running show a node's.

func init() {
	commands = append(commands, &command{
		name:    "status",
		summary: "the asked node's own state: version, uptime, listeners, replicas, clients, memory, disk",
		help: `Shows the state of the node asked (--node), as rabbitmq-diagnostics status
does: its version and uptime, data directory, listeners, whether it serves
clients (running: it knows the metadata leader and has caught up with it), its
place in the metadata group and maintenance mode, its quorum queue replicas by
role, its client connections and channels, memory and disk against their
watermarks, and its resource alarms. Ask each node for its own.`,
		setup: nodeStatus(""),
	}, &command{
		name:    "check running",
		summary: "fails unless the asked node is up and serving clients",
		help: `Exit status 0 if the node asked (--node) is up and serving clients: it knows
the metadata group's leader and its copy of the metadata has caught up since
it started, as rabbitmq-diagnostics check_running checks that the broker runs
on a node. Exit status 1 while it starts, waits for the cluster to form, or
cannot be reached: a readiness check for a container or a service manager.`,
		setup: nodeStatus("running"),
	})
}

type nodeStatusReport struct {
	// Check is "running" for check running, empty for status.
	Check string `json:"check,omitempty"`
	nodeReport
	GoVersion      string            `json:"go_version"`
	PID            int64             `json:"pid"`
	Started        time.Time         `json:"started"`
	UptimeSeconds  int64             `json:"uptime_seconds"`
	DataDir        string            `json:"data_dir"`
	AMQPListen     string            `json:"amqp_listen_addr"`
	Running        bool              `json:"running"`
	MetadataLeader string            `json:"metadata_leader"`
	Replicas       map[string]uint32 `json:"replicas"`
	Connections    uint32            `json:"connections"`
	Channels       uint32            `json:"channels"`
	MemoryUsed     int64             `json:"memory_used_bytes"`
	MemoryLimit    int64             `json:"memory_limit_bytes"`
	DiskFree       int64             `json:"disk_free_bytes"`
	DiskFreeLimit  int64             `json:"disk_free_limit_bytes"`
	Goroutines     uint32            `json:"goroutines"`
	// PayloadCache: message payloads the queue leaders keep in memory
	// for delivery, of PayloadCacheLimit at most.
	PayloadCache      int64 `json:"payload_cache_bytes"`
	PayloadCacheLimit int64 `json:"payload_cache_limit_bytes"`
}

func nodeStatus(check string) func(*flag.FlagSet) body {
	return func(*flag.FlagSet) body {
		return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
			resp, err := c.NodeStatus(ctx, &adminpb.NodeStatusRequest{})
			if err != nil {
				return nil, err
			}
			started := time.UnixMilli(resp.StartedUnixMs).UTC()
			r := &nodeStatusReport{
				Check:      check,
				nodeReport: nodeReportOf(resp.Node),
				GoVersion:  resp.GoVersion, PID: resp.Pid, Started: started, UptimeSeconds: int64(time.Since(started).Seconds()),
				DataDir: resp.DataDir, AMQPListen: resp.AmqpListenAddr, Running: resp.Running, MetadataLeader: resp.MetadataLeader, Replicas: resp.Replicas,
				Connections: resp.Connections, Channels: resp.Channels, MemoryUsed: resp.MemoryUsedBytes, MemoryLimit: resp.MemoryLimitBytes,
				DiskFree: resp.DiskFreeBytes, DiskFreeLimit: resp.DiskFreeLimitBytes, Goroutines: resp.Goroutines,
				PayloadCache: resp.PayloadCacheBytes, PayloadCacheLimit: resp.PayloadCacheLimitBytes,
			}
			if r.Replicas == nil {
				r.Replicas = map[string]uint32{}
			}
			return r, nil
		}
	}
}

func (r *nodeStatusReport) failed() bool { return r.Check == "running" && !r.Running }

func (r *nodeStatusReport) writeText(w io.Writer) {
	if r.Check == "running" {
		if r.Running {
			fmt.Fprintf(w, "Node %s is running: serving clients (metadata leader %s).\n", r.Name, r.MetadataLeader)
		} else {
			fmt.Fprintf(w, "Node %s is not running yet: it has not caught up with the metadata leader (%s).\n", r.Name, orDash(r.MetadataLeader))
		}
		return
	}
	running := "yes, serving clients"
	if !r.Running {
		running = "no: waiting for the metadata leader or catching up with it"
	}
	role := r.MetadataRole
	if r.MetadataLeader != "" && r.MetadataLeader != r.Name {
		role += " (leader " + r.MetadataLeader + ")"
	}
	memLimit, diskLimit := "none", "none"
	if r.MemoryLimit > 0 {
		memLimit = bytesText(r.MemoryLimit)
	}
	if r.DiskFreeLimit > 0 {
		diskLimit = bytesText(r.DiskFreeLimit)
	}
	free := "unknown"
	if r.DiskFree >= 0 {
		free = bytesText(r.DiskFree)
	}
	var replicas []string
	total := uint32(0)
	for _, role := range []string{"leader", "follower", "candidate", "non-voter", "asleep", "quarantined", "re-syncing"} {
		if k := r.Replicas[role]; k > 0 {
			replicas = append(replicas, fmt.Sprintf("%d %s", k, role))
			total += k
		}
	}
	replicaText := "none"
	if total > 0 {
		replicaText = fmt.Sprintf("%d (%s)", total, strings.Join(replicas, ", "))
	}
	rows := [][]string{
		{"Version", fmt.Sprintf("%s (%s)", orDash(r.Version), r.GoVersion)},
		{"PID", fmt.Sprint(r.PID)},
		{"Uptime", fmt.Sprintf("%s (since %s)", (time.Duration(r.UptimeSeconds) * time.Second).String(), r.Started.Format(time.RFC3339))},
		{"Data directory", r.DataDir},
		{"Running", running},
		{"Maintenance", orDash(r.Maintenance)},
		{"Listeners", fmt.Sprintf("AMQP %s, internal (Raft, forwarding, warrenctl) %s, gossip %s", orDash(r.AMQPListen), orDash(r.Internal), orDash(r.Gossip))},
		{"Metadata group", role},
		{"Queue replicas", replicaText},
		{"Clients", fmt.Sprintf("%d connections, %d channels", r.Connections, r.Channels)},
		{"Memory", fmt.Sprintf("%s used, high watermark %s", bytesText(r.MemoryUsed), memLimit)},
		{"Payload cache", fmt.Sprintf("%s of %s: message payloads queue leaders keep for delivery",
			bytesText(r.PayloadCache), bytesText(r.PayloadCacheLimit))},
		{"Disk", fmt.Sprintf("%s free, limit %s", free, diskLimit)},
		{"Alarms", orDash(strings.Join(r.Alarms, ", "))},
		{"Goroutines", fmt.Sprint(r.Goroutines)},
	}
	fmt.Fprintf(w, "Status of node %s\n\n", r.Name)
	for _, row := range rows {
		fmt.Fprintf(w, "%-16s %s\n", row[0], row[1])
	}
}
