package exporter_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/alarm"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/exporter"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// scrape reads one endpoint: every series (name with its labels, as the
// text format writes them) and its value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", url, line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// startNode starts a standalone node (memoryLimit: its memory high
// watermark, 0 for none) and serves its metrics; it returns the node and
// the metrics server's URL. A node with a watermark counts only message
// bytes towards it, since the test process's memory is not the node's
// alone.
func startNode(t *testing.T, memoryLimit int64) (*node.Node, string) {
	t.Helper()
	return startNodeWith(t, broker.Config{Seed: broker.DefaultSeed(), MemoryLimit: memoryLimit})
}

// startNodeWith is startNode with the broker's settings given.
func startNodeWith(t *testing.T, cfg broker.Config) (*node.Node, string) {
	t.Helper()
	n, err := node.Start(node.Config{
		DataDir: t.TempDir(), AMQPAddr: "127.0.0.1:0",
		Log:              slog.New(slog.DiscardHandler),
		Broker:           cfg,
		MessageBytesOnly: cfg.MemoryLimit > 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	srv := httptest.NewServer(exporter.Handler(n, "test"))
	t.Cleanup(srv.Close)
	return n, srv.URL
}

// dial connects a client to n and opens a channel on it.
func dial(t *testing.T, n *node.Node) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	c, err := amqp091.Dial(fmt.Sprintf("amqp://guest:guest@%s/", n.AMQPAddr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return c, ch
}

// A standalone node counts what a real client does, under RabbitMQ's
// metric names: publishes with confirms, an unroutable mandatory publish,
// deliveries and their acks, an empty basic.get, and the queue's depth.
func TestNodeMetrics(t *testing.T) {
	n, url := startNode(t, 0)
	c, ch := dial(t, n)
	if _, err := ch.QueueDeclare("orders", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	for range 10 {
		dc, err := ch.PublishWithDeferredConfirm("", "orders", false, false, amqp091.Publishing{Body: []byte("x")})
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
	dc, err := ch.PublishWithDeferredConfirm("", "nowhere", true, false, amqp091.Publishing{Body: []byte("x")})
	if err != nil || !dc.Wait() {
		t.Fatalf("unroutable publish: %v", err)
	}
	<-returns

	sub, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Qos(4, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Consume("orders", "worker", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Acknowledge six, with one multiple ack for the last three, and keep
	// four unacknowledged: the consumer's prefetch.
	for i := range 10 {
		d := <-ds
		if i < 3 {
			d.Ack(false)
		} else if i == 5 {
			d.Ack(true)
		}
	}

	m := map[string]float64{}
	g := func(name string) float64 { return m[name+`{protocol="amqp091"}`] }
	testwait.For(t, 10*time.Second, "six acknowledgements counted and four unacked", func() bool {
		m = scrape(t, url+"/metrics")
		return g("rabbitmq_global_messages_acknowledged_total") == 6 && m["rabbitmq_queue_messages_unacked"] == 4
	})
	want := map[string]float64{
		"rabbitmq_global_messages_received_total":                     11,
		"rabbitmq_global_messages_received_confirm_total":             11,
		"rabbitmq_global_messages_routed_total":                       10,
		"rabbitmq_global_messages_unroutable_returned_total":          1,
		"rabbitmq_global_messages_unroutable_dropped_total":           0,
		"rabbitmq_global_messages_confirmed_total":                    11,
		"rabbitmq_global_messages_delivered_total":                    10,
		"rabbitmq_global_messages_delivered_consume_manual_ack_total": 10,
		"rabbitmq_global_messages_delivered_consume_auto_ack_total":   0,
	}
	for name, v := range want {
		if got := g(name); got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	for name, v := range map[string]float64{
		"rabbitmq_connections": 1, "rabbitmq_channels": 2, "rabbitmq_consumers": 1,
		"rabbitmq_channel_messages_unacked": 4, "rabbitmq_connections_opened_total": 1,
		"rabbitmq_queues": 1, "rabbitmq_queue_messages_ready": 0, "rabbitmq_queue_messages": 4, "rabbitmq_queue_consumers": 1,
	} {
		if got := m[name]; got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	if m[`rabbitmq_identity_info{rabbitmq_cluster="warren",rabbitmq_endpoint="default",rabbitmq_node="standalone"}`] != 1 {
		t.Errorf("no identity info: %v", m)
	}
	if m["go_goroutines"] == 0 || m["process_resident_memory_bytes"] == 0 {
		t.Errorf("no Go or process metrics")
	}
	// The memory the alarm counts is the process's (the memory monitor's
	// look), which holds at least the Go heap in use.
	if used := m["rabbitmq_process_resident_memory_bytes"]; used < m["go_memstats_heap_inuse_bytes"]/2 || used > m["process_resident_memory_bytes"]*2 {
		t.Errorf("memory used %v; heap in use %v, resident %v", used, m["go_memstats_heap_inuse_bytes"], m["process_resident_memory_bytes"])
	}

	// An empty basic.get, and the queue's own series per object.
	if _, ok, err := ch.Get("orders", false); err != nil || ok {
		t.Fatalf("get from an empty queue: ok %v, err %v", ok, err)
	}
	m = scrape(t, url+"/metrics/per-object")
	if g("rabbitmq_global_messages_get_empty_total") != 1 {
		t.Errorf("get_empty = %v, want 1", g("rabbitmq_global_messages_get_empty_total"))
	}
	if v := m[`rabbitmq_queue_messages_unacked{queue="orders",vhost="/"}`]; v != 4 {
		t.Errorf("per-object unacked of orders = %v, want 4", v)
	}
	// The connection's and each channel's series, under the names
	// RabbitMQ shows for them.
	conns := n.Connections()
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
	obj := func(name, object string) float64 {
		v, ok := m[name+`{channel="`+object+`"}`]
		if !ok {
			t.Errorf("no %s for %q", name, object)
		}
		return v
	}
	conn := conns[0].Name
	pub, cons := conn+" (1)", conn+" (2)"
	if v := obj("rabbitmq_connection_incoming_bytes_total", conn); v < 11*(1+8) {
		t.Errorf("incoming bytes %v: fewer than the bodies alone", v)
	}
	if v := obj("rabbitmq_connection_outgoing_bytes_total", conn); v < 10 {
		t.Errorf("outgoing bytes %v: fewer than the deliveries' bodies", v)
	}
	for name, want := range map[[2]string]float64{
		{"rabbitmq_connection_channels", conn}:         2,
		{"rabbitmq_channel_consumers", pub}:            0,
		{"rabbitmq_channel_messages_unconfirmed", pub}: 0,
		{"rabbitmq_channel_consumers", cons}:           1,
		{"rabbitmq_channel_messages_unacked", cons}:    4,
		{"rabbitmq_consumer_prefetch", cons}:           4,
		{"rabbitmq_channel_prefetch", cons}:            0,
	} {
		if got := obj(name[0], name[1]); got != want {
			t.Errorf("%s of %q = %v, want %v", name[0], name[1], got, want)
		}
	}
	if _, ok := m["rabbitmq_channel_messages_unacked"]; ok {
		t.Error("per-object has the aggregated channel series as well")
	}

	// Closing the connection keeps the totals and counts the close.
	c.Close()
	testwait.For(t, 10*time.Second, "the connection to close", func() bool {
		m = scrape(t, url+"/metrics")
		return m["rabbitmq_connections"] == 0 && m["rabbitmq_connections_closed_total"] == 1
	})
	if g("rabbitmq_global_messages_received_total") != 11 || m["rabbitmq_channels_closed_total"] != 2 {
		t.Errorf("after close: received %v, channels closed %v", g("rabbitmq_global_messages_received_total"), m["rabbitmq_channels_closed_total"])
	}
}

// In a cluster each quorum queue's counts come from its leader's node
// only, and every member reports its Raft view; the leader's says so, and
// how long its entries took to commit.
func TestClusterQueueMetrics(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("jobs", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		dc, err := ch.PublishWithDeferredConfirm("", "jobs", false, false, amqp91Msg)
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
	var urls []string
	for _, m := range ms {
		srv := httptest.NewServer(exporter.Handler(m.Node, "test"))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL+"/metrics/per-object")
	}
	const ready = `rabbitmq_queue_messages_ready{queue="jobs",vhost="/"}`
	const leader = `warren_raft_leader{queue="jobs",vhost="/"}`
	const commit = `rabbitmq_raft_log_commit_index{queue="jobs",vhost="/"}`
	const latency = `rabbitmq_raft_entry_commit_latency_seconds{queue="jobs",vhost="/"}`
	testwait.For(t, 10*time.Second, "one node counting 5 ready, three replicas, one leading", func() bool {
		counted, leaders, replicas, latencies := 0, 0.0, 0, 0
		for _, u := range urls {
			m := scrape(t, u)
			if v, ok := m[latency]; ok {
				if v <= 0 || v > 10 || m[leader] != 1 {
					t.Errorf("commit latency %v s on a node whose replica leads: %v", v, m[leader])
				}
				latencies++
			}
			if v, ok := m[ready]; ok {
				if v != 5 {
					return false
				}
				counted++
			}
			if _, ok := m[commit]; ok {
				replicas++
			}
			leaders += m[leader]
		}
		return counted == 1 && replicas == 3 && leaders == 1 && latencies == 1
	})
}

var amqp91Msg = amqp091.Publishing{Body: []byte("x")}

// Past the memory high watermark the alarm shows, with the message bytes
// held and the limit, and the blocked connection counts as such.
func TestMemoryAlarmMetrics(t *testing.T) {
	const limit = 64 << 10
	n, url := startNode(t, limit)

	m := scrape(t, url+"/metrics")
	if m["rabbitmq_alarms_memory_used_watermark"] != 0 || m["rabbitmq_resident_memory_limit_bytes"] != limit {
		t.Fatalf("before: alarm %v, limit %v", m["rabbitmq_alarms_memory_used_watermark"], m["rabbitmq_resident_memory_limit_bytes"])
	}
	_, ch := dial(t, n)
	if _, err := ch.QueueDeclare("fill", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 16<<10)
	go func() {
		// 96 KiB: past the limit by the fifth, blocked at the sixth,
		// which alone fits once the queue is purged.
		for range 6 {
			if ch.PublishWithContext(context.Background(), "", "fill", false, false, amqp091.Publishing{Body: body}) != nil {
				return
			}
		}
	}()
	testwait.For(t, 10*time.Second, "the memory alarm", func() bool {
		m = scrape(t, url+"/metrics")
		return m["rabbitmq_alarms_memory_used_watermark"] == 1
	})
	if m["warren_memory_message_bytes"] < limit || m["rabbitmq_process_resident_memory_bytes"] != m["warren_memory_message_bytes"] {
		t.Errorf("message bytes %v, memory used %v, with the alarm on at %v (counting message bytes only)", m["warren_memory_message_bytes"], m["rabbitmq_process_resident_memory_bytes"], limit)
	}
	testwait.For(t, 10*time.Second, "the publisher's connection to show blocked", func() bool {
		conns := n.Connections()
		return len(conns) == 1 && conns[0].Blocked
	})

	// The blocked connection's reader waits for the alarm to clear: purge
	// through another connection, as an operator would.
	_, och := dial(t, n)
	if _, err := och.QueuePurge("fill", false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the alarm to clear", func() bool {
		m = scrape(t, url+"/metrics")
		return m["rabbitmq_alarms_memory_used_watermark"] == 0 && !n.Connections()[0].Blocked
	})
}

// TestDiskAlarmMetrics moves the node's disk free limit above and below
// the real free space of its data directory and reads RabbitMQ's disk
// gauges each time.
func TestDiskAlarmMetrics(t *testing.T) {
	n, url := startNode(t, 0)
	m := scrape(t, url+"/metrics")
	free := m["rabbitmq_disk_space_available_bytes"]
	if free <= 0 || m["rabbitmq_alarms_free_disk_space_watermark"] != 0 || m["rabbitmq_disk_space_available_limit_bytes"] != 0 {
		t.Fatalf("before: free %v, alarm %v, limit %v", free, m["rabbitmq_alarms_free_disk_space_watermark"], m["rabbitmq_disk_space_available_limit_bytes"])
	}
	if err := n.SetWatermark(alarm.Disk, "1000000TB"); err != nil {
		t.Fatal(err)
	}
	m = scrape(t, url+"/metrics")
	if m["rabbitmq_alarms_free_disk_space_watermark"] != 1 || m["rabbitmq_disk_space_available_limit_bytes"] != 1e18 {
		t.Fatalf("limit above the free space: alarm %v, limit %v", m["rabbitmq_alarms_free_disk_space_watermark"], m["rabbitmq_disk_space_available_limit_bytes"])
	}
	if err := n.SetWatermark(alarm.Disk, "1MB"); err != nil {
		t.Fatal(err)
	}
	m = scrape(t, url+"/metrics")
	if m["rabbitmq_alarms_free_disk_space_watermark"] != 0 || m["rabbitmq_disk_space_available_limit_bytes"] != 1e6 {
		t.Fatalf("limit below the free space: alarm %v, limit %v", m["rabbitmq_alarms_free_disk_space_watermark"], m["rabbitmq_disk_space_available_limit_bytes"])
	}
}

// Through the real broker: one quorum queue on three nodes, publishes
// with confirms one at a time. Each node's warren_wal_syncs_total shows
// the leader and the eager follower syncing for every publish and the
// spare follower (--spare-follower-delay, long here) in batches.
func TestSpareFollowerSyncsInBatches(t *testing.T) {
	const delay = 100 * time.Millisecond
	ms := nodetest.StartCluster(t, 3, func(c *node.ClusterConfig) { c.SpareFollowerDelay = delay })
	ch := ms[0].Channel()
	if _, err := ch.QueueDeclare("spare", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, m := range ms {
		srv := httptest.NewServer(exporter.Handler(m.Node, "test"))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL+"/metrics")
	}
	syncs := func() []float64 {
		var out []float64
		for _, u := range urls {
			v, ok := scrape(t, u)["warren_wal_syncs_total"]
			if !ok {
				t.Fatalf("%s: no warren_wal_syncs_total", u)
			}
			out = append(out, v)
		}
		return out
	}
	publish := func() {
		dc, err := ch.PublishWithDeferredConfirm("", "spare", false, false, amqp91Msg)
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
	for range 5 { // every member open and replicating
		publish()
	}
	before := syncs()
	const n = 150
	start := time.Now()
	for range n {
		publish()
	}
	took := time.Since(start)
	after := syncs()
	var delta []float64
	for i := range after {
		delta = append(delta, after[i]-before[i])
	}
	t.Logf("%d publishes in %v; syncs per node %v", n, took, delta)
	sorted := slices.Sorted(slices.Values(delta))
	// The spare gets at most one request per delay (plus the one that
	// started each wait); the other two sync about once per publish.
	if most := float64(took/delay) + 5; sorted[0] > most {
		t.Fatalf("least syncing node synced %v times in %v, more than a spare's %v", sorted[0], took, most)
	}
	if sorted[1] < n/2 {
		t.Fatalf("only %v syncs on the eager nodes for %d publishes: are the nodes' logs counted?", sorted[1], n)
	}
}
