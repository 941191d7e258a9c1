package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/replica"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestNodeStatusAgainstRealCluster: status asked of each of three real
// nodes describes that node (its listeners, replicas, clients), check
// running passes on a running node and fails on a stopped one.
func TestNodeStatusAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	ch := ms[1].Channel() // a connection and a channel on warren-1
	for _, name := range []string{"a", "b"} {
		if _, err := ch.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
	}

	type status struct {
		Name, State           string
		AMQP                  string `json:"amqp_listen_addr"`
		Internal              string `json:"internal_addr"`
		Running               bool
		MetadataRole          string `json:"metadata_role"`
		MetadataLeader        string `json:"metadata_leader"`
		Replicas              map[string]int
		Connections, Channels int
		Uptime                int64  `json:"uptime_seconds"`
		DataDir               string `json:"data_dir"`
		MemoryUsed            int64  `json:"memory_used_bytes"`
		DiskFree              int64  `json:"disk_free_bytes"`
		Goroutines            int
		PayloadCache          int64 `json:"payload_cache_bytes"`
		PayloadCacheLimit     int64 `json:"payload_cache_limit_bytes"`
	}
	// Five messages nobody consumes: their payloads stay at hand on the
	// leader of a.
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		dc, err := ch.PublishWithDeferredConfirm("", "a", false, false, amqp091.Publishing{Body: []byte("kept for a consumer")})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(t.Context()); !ok || err != nil {
			t.Fatalf("confirm: %v %v", ok, err)
		}
	}
	var payloads int64
	for i, m := range ms {
		var st status
		testwait.For(t, 15*time.Second, "both queues' replicas settled on "+m.Name(), func() bool {
			st = status{}
			code, out, errOut := warrenctl(t, "--node", m.InternalAddr().String(), "--json", "status")
			if code != 0 {
				t.Fatalf("status of %s: exit %d: %s", m.Name(), code, errOut)
			}
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatal(err)
			}
			return st.Replicas["leader"]+st.Replicas["follower"] == 2
		})
		if st.Name != m.Name() || st.State != "alive" || !st.Running || st.AMQP != m.AMQPAddr().String() ||
			st.Internal != m.InternalAddr().String() || st.MetadataRole == "none" || st.MetadataLeader == "" ||
			st.DataDir == "" || st.MemoryUsed <= 0 || st.DiskFree <= 0 || st.Goroutines == 0 {
			t.Errorf("status of %s: %+v", m.Name(), st)
		}
		if st.PayloadCacheLimit != replica.DefaultPayloadCache {
			t.Errorf("status of %s: payload cache limit %d", m.Name(), st.PayloadCacheLimit)
		}
		payloads += st.PayloadCache
		wantConns := 0
		if i == 1 {
			wantConns = 1
		}
		if st.Connections != wantConns || st.Channels != wantConns {
			t.Errorf("status of %s: %d connections, %d channels, want %d each", m.Name(), st.Connections, st.Channels, wantConns)
		}
	}
	if payloads < 5*int64(len("kept for a consumer")) {
		t.Errorf("the nodes keep %d bytes of payloads, want the five messages'", payloads)
	}
	code, out, errOut := warrenctl(t, "--node", ms[0].InternalAddr().String(), "status")
	if code != 0 || !strings.Contains(out, "Status of node "+ms[0].Name()) || !strings.Contains(out, "yes, serving clients") ||
		!strings.Contains(out, "2 (") || !strings.Contains(out, "message payloads queue leaders keep for delivery") {
		t.Errorf("status as text: exit %d %s:\n%s", code, errOut, out)
	}
	t.Logf("\n%s", out)

	addr := ms[2].InternalAddr().String()
	code, out, _ = warrenctl(t, "--node", addr, "check", "running")
	if code != 0 || !strings.Contains(out, "is running") {
		t.Errorf("check running: exit %d: %s", code, out)
	}
	ms[2].Stop()
	code, _, errOut = warrenctl(t, "--node", addr, "--timeout", "2s", "check", "running")
	if code != 1 || errOut == "" {
		t.Errorf("check running of a stopped node: exit %d: %q", code, errOut)
	}
}
