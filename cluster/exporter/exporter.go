// Package exporter serves a node's metrics in Prometheus's text format,
// under the names RabbitMQ's rabbitmq_prometheus plugin gives the same
// quantities, so that its Grafana dashboards and alerts read Warren too:
// /metrics aggregates per node (as RabbitMQ's default endpoint does),
// /metrics/per-object labels each queue's series with vhost and queue,
// and has each connection's and channel's.
// Metrics only Warren has are named warren_*.
//
// Every scrape reads the node's own state: its connections, its message
// counters, the queues it hosts and the replicas it holds. It asks no
// other node, so each node is scraped on its own, as RabbitMQ's are.
package exporter

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/alarm"
	"github.com/warrenmq/warren/cluster/node"
)

// Handler serves n's metrics: /metrics and /metrics/per-object.
func Handler(n *node.Node, version string) http.Handler {
	mux := http.NewServeMux()
	// Reads only: the port carries no credentials (as rabbitmq_prometheus
	// by default), so it answers nothing but GET and HEAD.
	mux.Handle("GET /metrics", handlerFor(&collector{n: n, version: version}, true))
	mux.Handle("GET /metrics/per-object", handlerFor(&collector{n: n, version: version, perObject: true}, false))
	return mux
}

func handlerFor(c *collector, withProcess bool) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if withProcess {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// collector turns one scrape's reading of the node into metrics.
type collector struct {
	n         *node.Node
	version   string
	perObject bool
}

// Describe sends nothing: the collector is unchecked, its series depend
// on the queues of the moment.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{ch: ch}
	nodeName := c.n.Name()
	if nodeName == "" {
		nodeName = "standalone"
	}
	endpoint := "default"
	if c.perObject {
		endpoint = "per-object"
	}
	e.gauge("rabbitmq_identity_info", "RabbitMQ node & cluster identity info (here: Warren's)", 1,
		"rabbitmq_node", nodeName, "rabbitmq_cluster", c.n.ClusterName(), "rabbitmq_endpoint", endpoint)
	e.gauge("warren_build_info", "Warren and Go versions", 1, "version", c.version, "go_version", runtime.Version())

	c.clients(&e)
	c.counters(&e)
	c.queues(&e)
	c.memory(&e)
	c.disk(&e)
	c.quarantine(&e) // quarantine.go
	if syncs, ok := c.n.LogSyncs(); ok {
		e.counter("warren_wal_syncs_total", "Durable writes to disk (a direct O_DSYNC write, or a write and fdatasync) of the node's write-ahead log, which holds every local quorum queue replica's Raft log", syncs)
	}
}

// memory is the node's memory alarm, as RabbitMQ's: the alarm gauge, the
// memory the node uses as the alarm counts it and the watermark; and the
// message bytes in-memory queues hold, part of that memory.
func (c *collector) memory(e *emitter) {
	b := c.n.Broker()
	e.gauge("rabbitmq_alarms_memory_used_watermark", "Is the memory alarm in effect on this node? (publishers blocked across the cluster)", boolGauge(b.MemoryAlarm()))
	e.gauge("rabbitmq_process_resident_memory_bytes", "Memory used in bytes, as the memory alarm counts it", float64(b.MemoryUsed()))
	if limit := b.MemoryLimit(); limit > 0 {
		e.gauge("rabbitmq_resident_memory_limit_bytes", "Memory high watermark in bytes", float64(limit))
	}
	e.gauge("warren_memory_message_bytes", "Message bytes held by in-memory (classic) queues", float64(b.MemoryHeld()))
}

// disk is the node's free disk space alarm, with the free space of its
// data directory's file system and the limit, as RabbitMQ's.
func (c *collector) disk(e *emitter) {
	d := c.n.DiskMonitor()
	if d == nil {
		return
	}
	on := slices.Contains(c.n.Broker().Alarms().Local(), alarm.Disk)
	e.gauge("rabbitmq_alarms_free_disk_space_watermark", "Is the free disk space alarm in effect on this node? (publishers blocked across the cluster)", boolGauge(on))
	if free := d.Free(); free >= 0 {
		e.gauge("rabbitmq_disk_space_available_bytes", "Disk space available in bytes", float64(free))
	}
	e.gauge("rabbitmq_disk_space_available_limit_bytes", "Free disk space low watermark in bytes", float64(d.Limit()))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// clients are the node's connections, channels and consumers now.
func (c *collector) clients(e *emitter) {
	var channels, consumers, unacked, unconfirmed int
	conns := c.n.Connections()
	for _, conn := range conns {
		channels += len(conn.Channels)
		for _, ch := range conn.Channels {
			consumers += len(ch.Consumers)
			unacked += ch.Unacked
			unconfirmed += ch.Unconfirmed
		}
	}
	e.gauge("rabbitmq_connections", "Connections currently open", float64(len(conns)))
	e.gauge("rabbitmq_channels", "Channels currently open", float64(channels))
	e.gauge("rabbitmq_consumers", "Consumers currently connected", float64(consumers))
	if c.perObject {
		c.clientObjects(e, conns)
		return
	}
	e.gauge("rabbitmq_channel_messages_unacked", unackedHelp, float64(unacked))
	e.gauge("rabbitmq_channel_messages_unconfirmed", unconfirmedHelp, float64(unconfirmed))
}

const (
	unackedHelp     = "Delivered but not yet acknowledged messages"
	unconfirmedHelp = "Published but not yet confirmed messages"
)

// clientObjects are each connection's and each channel's series, as
// RabbitMQ's per-object endpoint has them. RabbitMQ labels both with
// channel="<the Erlang process>"; Warren's label is the name RabbitMQ
// shows for the object (management UI, rabbitmqctl): "client address ->
// server address" for a connection, that and " (number)" for a channel.
func (c *collector) clientObjects(e *emitter, conns []server.ConnectionInfo) {
	for _, conn := range conns {
		l := []string{"channel", conn.Name}
		e.counter("rabbitmq_connection_incoming_bytes_total", "Total number of bytes received on a connection", conn.RecvBytes, l...)
		e.counter("rabbitmq_connection_outgoing_bytes_total", "Total number of bytes sent on a connection", conn.SentBytes, l...)
		e.gauge("rabbitmq_connection_channels", "Channels on a connection", float64(len(conn.Channels)), l...)
		for _, ch := range conn.Channels {
			l := []string{"channel", fmt.Sprintf("%s (%d)", conn.Name, ch.Number)}
			e.gauge("rabbitmq_channel_consumers", "Consumers on a channel", float64(len(ch.Consumers)), l...)
			e.gauge("rabbitmq_channel_messages_unacked", unackedHelp, float64(ch.Unacked), l...)
			e.gauge("rabbitmq_channel_messages_unconfirmed", unconfirmedHelp, float64(ch.Unconfirmed), l...)
			e.gauge("rabbitmq_consumer_prefetch", "Limit of unacknowledged messages for each consumer", float64(ch.Prefetch), l...)
			e.gauge("rabbitmq_channel_prefetch", "Total limit of unacknowledged messages for all consumers on a channel", float64(ch.GlobalPrefetch), l...)
		}
	}
}

// counters are the node's totals since it started.
func (c *collector) counters(e *emitter) {
	k := c.n.MessageCounters()
	e.counter("rabbitmq_connections_opened_total", "Total number of connections opened", k.ConnectionsOpened)
	e.counter("rabbitmq_connections_closed_total", "Total number of connections closed or terminated", k.ConnectionsClosed)
	e.counter("rabbitmq_channels_opened_total", "Total number of channels opened", k.ChannelsOpened)
	e.counter("rabbitmq_channels_closed_total", "Total number of channels closed", k.ChannelsClosed)

	const p = "protocol"
	const amqp = "amqp091"
	g := func(name, help string, v uint64) {
		e.counter("rabbitmq_global_messages_"+name+"_total", help, v, p, amqp)
	}
	g("received", "Total number of messages received from publishers", k.Received)
	g("received_confirm", "Total number of messages received from publishers expecting confirmations", k.ReceivedConfirm)
	g("routed", "Total number of messages routed to queues or streams", k.Routed)
	g("unroutable_dropped", "Total number of messages published as non-mandatory into an exchange and dropped as unroutable", k.UnroutableDropped)
	g("unroutable_returned", "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable", k.UnroutableReturned)
	g("confirmed", "Total number of messages confirmed to publishers", k.Confirmed)
	g("delivered", "Total number of messages delivered to consumers",
		k.DeliveredManualAck+k.DeliveredAutoAck+k.GetManualAck+k.GetAutoAck)
	g("delivered_consume_manual_ack", "Total number of messages delivered to consumers using basic.consume with manual acknowledgment", k.DeliveredManualAck)
	g("delivered_consume_auto_ack", "Total number of messages delivered to consumers using basic.consume with automatic acknowledgment", k.DeliveredAutoAck)
	g("delivered_get_manual_ack", "Total number of messages delivered to consumers using basic.get with manual acknowledgment", k.GetManualAck)
	g("delivered_get_auto_ack", "Total number of messages delivered to consumers using basic.get with automatic acknowledgment", k.GetAutoAck)
	g("get_empty", "Total number of times basic.get operations fetched no message", k.GetEmpty)
	g("redelivered", "Total number of messages redelivered to consumers", k.Redelivered)
	g("acknowledged", "Total number of messages acknowledged by consumers", k.Acknowledged)
}

// queues are the counts of the queues this node hosts and the Raft view
// of the replicas it holds: one series per queue on /metrics/per-object,
// their sums on /metrics.
func (c *collector) queues(e *emitter) {
	qs := c.n.QueueMetrics()
	type series struct {
		name, help string
		value      func(q *node.QueueMetrics) (float64, bool)
	}
	hosted := func(f func(q *node.QueueMetrics) uint32) func(q *node.QueueMetrics) (float64, bool) {
		return func(q *node.QueueMetrics) (float64, bool) { return float64(f(q)), q.Hosted }
	}
	raft := func(f func(q *node.QueueMetrics) uint64) func(q *node.QueueMetrics) (float64, bool) {
		return func(q *node.QueueMetrics) (float64, bool) {
			if q.Raft == nil {
				return 0, false
			}
			return float64(f(q)), true
		}
	}
	all := []series{
		{"rabbitmq_queue_messages_ready", "Messages ready to be delivered to consumers",
			hosted(func(q *node.QueueMetrics) uint32 { return q.Stats.Ready })},
		{"rabbitmq_queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged",
			hosted(func(q *node.QueueMetrics) uint32 { return q.Stats.Unacked })},
		{"rabbitmq_queue_messages", "Sum of ready and unacknowledged messages - total queue depth",
			hosted(func(q *node.QueueMetrics) uint32 { return q.Stats.Ready + q.Stats.Unacked })},
		{"rabbitmq_queue_consumers", "Consumers on a queue",
			hosted(func(q *node.QueueMetrics) uint32 { return q.Stats.Consumers })},
		{"warren_queue_messages_dead_lettered", "At-least-once dead letters a queue holds until their targets confirm them (RabbitMQ's messages_dlx)",
			hosted(func(q *node.QueueMetrics) uint32 { return q.Stats.DeadLettered })},
		{"rabbitmq_raft_term_total", "Current Raft term number",
			raft(func(q *node.QueueMetrics) uint64 { return q.Raft.Term })},
		{"rabbitmq_raft_log_commit_index", "Raft log commit index",
			raft(func(q *node.QueueMetrics) uint64 { return q.Raft.CommitIndex })},
		{"rabbitmq_raft_log_last_applied_index", "Raft log last applied index",
			raft(func(q *node.QueueMetrics) uint64 { return q.Raft.AppliedIndex })},
		{"rabbitmq_raft_log_last_written_index", "Raft log last written index",
			raft(func(q *node.QueueMetrics) uint64 { return q.Raft.LastLogIndex })},
		{"rabbitmq_raft_log_snapshot_index", "Raft log snapshot index",
			raft(func(q *node.QueueMetrics) uint64 { return q.Raft.SnapshotIndex })},
		{"warren_raft_leader", "1 if this node's replica leads the queue's Raft group, else 0",
			raft(func(q *node.QueueMetrics) uint64 {
				if q.Raft.State == "Leader" {
					return 1
				}
				return 0
			})},
	}
	hostedCount := 0
	for i := range qs {
		if qs[i].Hosted {
			hostedCount++
		}
	}
	e.gauge("rabbitmq_queues", "Queues available (hosted by this node: led, for a quorum queue)", float64(hostedCount))
	c.commitLatency(e, qs)
	for _, s := range all {
		sum, seen := 0.0, false
		for i := range qs {
			v, ok := s.value(&qs[i])
			if !ok {
				continue
			}
			if c.perObject {
				e.gauge(s.name, s.help, v, "vhost", qs[i].Vhost, "queue", qs[i].Name)
			} else {
				sum, seen = sum+v, true
			}
		}
		if !c.perObject && seen {
			e.gauge(s.name, s.help, sum)
		}
	}
}

// commitLatency is each leading replica's last entry's time from append
// to apply; on /metrics their mean (RabbitMQ's aggregated endpoint sums
// it, which no query can use).
func (c *collector) commitLatency(e *emitter, qs []node.QueueMetrics) {
	const name = "rabbitmq_raft_entry_commit_latency_seconds"
	const help = "Time taken for an entry to be committed (the last entry a leader appended, from append to apply)"
	var sum time.Duration
	n := 0
	for i := range qs {
		d := qs[i].CommitLatency
		if d <= 0 {
			continue
		}
		if c.perObject {
			e.gauge(name, help, d.Seconds(), "vhost", qs[i].Vhost, "queue", qs[i].Name)
		}
		sum += d
		n++
	}
	if !c.perObject && n > 0 {
		e.gauge(name, help, (sum / time.Duration(n)).Seconds())
	}
}

// emitter sends const metrics, each with its own description (a scrape
// builds a few dozen: caching them would save nothing that matters).
type emitter struct{ ch chan<- prometheus.Metric }

func (e *emitter) gauge(name, help string, v float64, labels ...string) {
	e.send(name, help, prometheus.GaugeValue, v, labels)
}

func (e *emitter) counter(name, help string, v uint64, labels ...string) {
	e.send(name, help, prometheus.CounterValue, float64(v), labels)
}

func (e *emitter) send(name, help string, t prometheus.ValueType, v float64, labels []string) {
	var keys, values []string
	for i := 0; i+1 < len(labels); i += 2 {
		keys = append(keys, labels[i])
		values = append(values, labels[i+1])
	}
	e.ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, keys, nil), t, v, values...)
}
