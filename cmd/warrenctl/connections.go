package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Client connections, channels and consumers, as rabbitmqctl's
// list_connections, list_channels and list_consumers. All three come from
// one ListConnections call, which asks every alive node for its own.

const clientsHelpTail = `

Every alive node is asked for its own clients. A node that cannot be asked is
named below the listing, and the exit status is then 1: the listing is
incomplete.`

var connectionCommands = []*command{
	{
		name:    "list connections",
		summary: "client connections on every node",
		help: `Lists the AMQP client connections of every node, as rabbitmqctl
list_connections does: the node, the connection's name (client address ->
server address), user, vhost, channels, the client's connection_name (or its
product and version), state (running, or blocked while the memory alarm holds
its publishes), bytes received and sent, and when it connected (UTC).` + clientsHelpTail,
		setup: func(fs *flag.FlagSet) body { return listClients(fs, flattenConnections) },
	},
	{
		name:    "list channels",
		summary: "channels of every client connection",
		help: `Lists the open channels of every client connection, as rabbitmqctl
list_channels does: the node and connection, the channel number, user, vhost,
mode (confirm, tx or none), consumers, deliveries not yet acknowledged
(UNACKED), publishes not yet confirmed (UNCONFIRMED), and basic.qos's prefetch
for the channel's next consumers (PREFETCH) and shared by its consumers
(GLOBAL).` + clientsHelpTail,
		setup: func(fs *flag.FlagSet) body { return listClients(fs, flattenChannels) },
	},
	{
		name:    "list consumers",
		summary: "consumers of every client channel",
		help: `Lists the consumers of every client channel, as rabbitmqctl list_consumers
does: vhost, queue, consumer tag, the node, connection and channel it
consumes on, whether it acknowledges (ACK), its prefetch limit (0: none),
whether it is exclusive, its priority (x-priority) and basic.consume's
arguments. The channel's unacknowledged deliveries are in list channels.` + clientsHelpTail,
		setup: func(fs *flag.FlagSet) body { return listClients(fs, flattenConsumers) },
	},
}

func init() { commands = append(commands, connectionCommands...) }

// listClients asks for every node's connections and makes the report with
// flatten.
func listClients(fs *flag.FlagSet, flatten func(r *clientsReport, conns []*adminpb.Connection)) body {
	vhost := fs.String("vhost", "", "only clients of this `vhost` (default: every vhost)")
	return func(ctx context.Context, c adminpb.AdminClient, _ []string) (report, error) {
		resp, err := c.ListConnections(ctx, &adminpb.ListConnectionsRequest{Vhost: *vhost})
		if err != nil {
			return nil, err
		}
		r := &clientsReport{Vhost: *vhost, Unreachable: []nodeError{}}
		for _, u := range resp.Unreachable {
			r.Unreachable = append(r.Unreachable, nodeError{Node: u.Node, Error: u.Error})
		}
		flatten(r, resp.Connections)
		return r, nil
	}
}

// clientsReport is one of the three listings: exactly one of its slices
// is set (non-nil), so that its JSON has that key only.
type clientsReport struct {
	Vhost       string          `json:"vhost,omitempty"` // the vhost asked for; empty for all
	Connections []connectionRow `json:"connections,omitempty"`
	Channels    []channelRow    `json:"channels,omitempty"`
	Consumers   []consumerRow   `json:"consumers,omitempty"`
	Unreachable []nodeError     `json:"unreachable"`
	// For text: "connections", "channels" or "consumers", and the table.
	kind   string
	header []string
	rows   [][]string
}

type nodeError struct {
	Node  string `json:"node"`
	Error string `json:"error"`
}

type connectionRow struct {
	Node           string `json:"node"`
	Name           string `json:"name"`
	User           string `json:"user"`
	Vhost          string `json:"vhost"`
	Channels       int    `json:"channels"`
	ClientName     string `json:"client_name"`
	ClientProduct  string `json:"client_product"`
	ClientVersion  string `json:"client_version"`
	ClientPlatform string `json:"client_platform"`
	State          string `json:"state"` // running or blocked
	RecvBytes      uint64 `json:"recv_bytes"`
	SentBytes      uint64 `json:"sent_bytes"`
	ConnectedAt    string `json:"connected_at"` // RFC 3339, UTC
	FrameMax       uint32 `json:"frame_max"`
	ChannelMax     uint32 `json:"channel_max"`
	Heartbeat      uint32 `json:"heartbeat"` // seconds
}

type channelRow struct {
	Node                string `json:"node"`
	Connection          string `json:"connection"`
	Number              uint32 `json:"number"`
	User                string `json:"user"`
	Vhost               string `json:"vhost"`
	Mode                string `json:"mode"` // confirm, tx or none
	Consumers           int    `json:"consumers"`
	Unacked             uint32 `json:"messages_unacknowledged"`
	Unconfirmed         uint32 `json:"messages_unconfirmed"`
	PrefetchCount       uint32 `json:"prefetch_count"`
	GlobalPrefetchCount uint32 `json:"global_prefetch_count"`
}

type consumerRow struct {
	Vhost         string `json:"vhost"`
	Queue         string `json:"queue"`
	Tag           string `json:"consumer_tag"`
	Node          string `json:"node"`
	Connection    string `json:"connection"`
	Channel       uint32 `json:"channel"`
	AckRequired   bool   `json:"ack_required"`
	PrefetchCount uint32 `json:"prefetch_count"`
	Exclusive     bool   `json:"exclusive"`
	Priority      int32  `json:"priority"`
	Arguments     string `json:"arguments"` // a JSON object, or empty
}

func flattenConnections(r *clientsReport, conns []*adminpb.Connection) {
	r.kind, r.Connections = "connections", []connectionRow{}
	for _, c := range conns {
		state := "running"
		if c.Blocked {
			state = "blocked"
		}
		r.Connections = append(r.Connections, connectionRow{
			Node: c.Node, Name: c.Name, User: c.User, Vhost: c.Vhost, Channels: len(c.Channels),
			ClientName: c.ClientName, ClientProduct: c.ClientProduct, ClientVersion: c.ClientVersion, ClientPlatform: c.ClientPlatform,
			State: state, RecvBytes: c.RecvBytes, SentBytes: c.SentBytes,
			ConnectedAt: time.UnixMilli(c.ConnectedAtUnixMs).UTC().Format(time.RFC3339),
			FrameMax:    c.FrameMax, ChannelMax: c.ChannelMax, Heartbeat: c.HeartbeatSeconds,
		})
	}
	r.header = []string{"NODE", "CONNECTION", "USER", "VHOST", "CHANNELS", "CLIENT", "STATE", "RECV", "SENT", "CONNECTED"}
	for _, c := range r.Connections {
		client := c.ClientName
		if client == "" {
			client = strings.TrimSpace(c.ClientProduct + " " + c.ClientVersion)
		}
		r.rows = append(r.rows, []string{c.Node, c.Name, c.User, c.Vhost, strconv.Itoa(c.Channels), orDash(client), c.State,
			u64(c.RecvBytes), u64(c.SentBytes), c.ConnectedAt})
	}
}

func flattenChannels(r *clientsReport, conns []*adminpb.Connection) {
	r.kind, r.Channels = "channels", []channelRow{}
	for _, c := range conns {
		for _, ch := range c.Channels {
			mode := "none"
			switch {
			case ch.Confirm:
				mode = "confirm"
			case ch.Transactional:
				mode = "tx"
			}
			r.Channels = append(r.Channels, channelRow{
				Node: c.Node, Connection: c.Name, Number: ch.Number, User: c.User, Vhost: c.Vhost, Mode: mode,
				Consumers: len(ch.Consumers), Unacked: ch.Unacked, Unconfirmed: ch.Unconfirmed,
				PrefetchCount: ch.PrefetchCount, GlobalPrefetchCount: ch.GlobalPrefetchCount,
			})
		}
	}
	r.header = []string{"NODE", "CONNECTION", "CHANNEL", "USER", "VHOST", "MODE", "CONSUMERS", "UNACKED", "UNCONFIRMED", "PREFETCH", "GLOBAL"}
	for _, ch := range r.Channels {
		r.rows = append(r.rows, []string{ch.Node, ch.Connection, u32(ch.Number), ch.User, ch.Vhost, ch.Mode, strconv.Itoa(ch.Consumers),
			u32(ch.Unacked), u32(ch.Unconfirmed), u32(ch.PrefetchCount), u32(ch.GlobalPrefetchCount)})
	}
}

func flattenConsumers(r *clientsReport, conns []*adminpb.Connection) {
	r.kind, r.Consumers = "consumers", []consumerRow{}
	for _, c := range conns {
		for _, ch := range c.Channels {
			for _, k := range ch.Consumers {
				r.Consumers = append(r.Consumers, consumerRow{
					Vhost: c.Vhost, Queue: k.Queue, Tag: k.Tag, Node: c.Node, Connection: c.Name, Channel: ch.Number,
					AckRequired: k.AckRequired, PrefetchCount: k.PrefetchCount, Exclusive: k.Exclusive, Priority: k.Priority,
					Arguments: k.Arguments,
				})
			}
		}
	}
	r.header = []string{"VHOST", "QUEUE", "TAG", "NODE", "CONNECTION", "CHANNEL", "ACK", "PREFETCH", "EXCLUSIVE", "PRIORITY", "ARGUMENTS"}
	for _, k := range r.Consumers {
		r.rows = append(r.rows, []string{k.Vhost, k.Queue, k.Tag, k.Node, k.Connection, u32(k.Channel), strconv.FormatBool(k.AckRequired),
			u32(k.PrefetchCount), strconv.FormatBool(k.Exclusive), strconv.Itoa(int(k.Priority)), orDash(k.Arguments)})
	}
}

func (r *clientsReport) writeText(w io.Writer) {
	if len(r.rows) == 0 {
		if r.Vhost != "" {
			fmt.Fprintf(w, "No %s in vhost '%s'.\n", r.kind, r.Vhost)
		} else {
			fmt.Fprintf(w, "No %s.\n", r.kind)
		}
	} else {
		table(w, r.header, r.rows)
	}
	for i, u := range r.Unreachable {
		if i == 0 {
			fmt.Fprintf(w, "\nIncomplete: not every node could be asked.\n")
		}
		fmt.Fprintf(w, "%s: %s\n", u.Node, u.Error)
	}
}

// failed: a node could not be asked, so the listing is incomplete.
func (r *clientsReport) failed() bool { return len(r.Unreachable) > 0 }

func u32(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
