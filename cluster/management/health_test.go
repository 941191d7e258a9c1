package management_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/warrenmq/warren/cluster/alarm"
)

func testHealthChecks(t *testing.T, n []*apiNode) {
	for _, path := range []string{"alarms", "local-alarms", "node-is-quorum-critical", "virtual-hosts", "ready-to-serve-clients", "protocol-listener/amqp", "protocol-listener/http"} {
		r := n[1].guest(t, "GET", "/api/health/checks/"+path, nil)
		expect(t, r, http.StatusOK, path)
		if r.object(t)["status"] != "ok" {
			t.Fatalf("%s: %s", path, r.body)
		}
	}
	_, port, _ := splitPort(n[1].AMQPAddr().String())
	expect(t, n[1].guest(t, "GET", "/api/health/checks/port-listener/"+port, nil), http.StatusOK, "amqp port")
	r := n[1].guest(t, "GET", "/api/health/checks/port-listener/1", nil)
	expect(t, r, http.StatusServiceUnavailable, "a port not listened on")
	if r.object(t)["status"] != "failed" {
		t.Fatalf("port check: %s", r.body)
	}
	expect(t, n[1].guest(t, "GET", "/api/health/checks/protocol-listener/stomp", nil), http.StatusServiceUnavailable, "a protocol not served")

	// A memory alarm on node 2 fails the cluster-wide check everywhere
	// and the local one only there.
	if err := n[2].SetWatermark(alarm.Memory, "1KiB"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node 0 to report node 2's alarm", func() bool {
		return n[0].guest(t, "GET", "/api/health/checks/alarms", nil).status == http.StatusServiceUnavailable
	})
	r = n[0].guest(t, "GET", "/api/health/checks/alarms", nil)
	if m := r.object(t); m["status"] != "failed" || len(m["alarms"].([]any)) == 0 {
		t.Fatalf("alarms check: %s", r.body)
	}
	expect(t, n[0].guest(t, "GET", "/api/health/checks/local-alarms", nil), http.StatusOK, "node 0 has no alarm of its own")
	expect(t, n[2].guest(t, "GET", "/api/health/checks/local-alarms", nil), http.StatusServiceUnavailable, "node 2's own alarm")
	if err := n[2].SetWatermark(alarm.Memory, "0.4"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the alarm cleared", func() bool {
		return n[0].guest(t, "GET", "/api/health/checks/alarms", nil).status == http.StatusOK
	})
	expectError(t, call(t, "GET", n[0].url+"/api/health/checks/alarms", "mgr", "m", nil), http.StatusUnauthorized, "not_authorised", "a management user runs a health check")
}

// testQuorumCritical stops node 2: every quorum queue then has two of
// its three members, and losing either remaining node would lose its
// quorum. It runs last, since it takes a node down.
func testQuorumCritical(t *testing.T, n []*apiNode) {
	expect(t, n[0].guest(t, "PUT", "/api/queues/%2F/critical", map[string]any{"arguments": map[string]any{"x-queue-type": "quorum"}}), http.StatusCreated, "declare")
	eventually(t, "all three members online", func() bool {
		online, _ := queue(t, n[0], "/api/queues/%2F/critical")["online"].([]any)
		return len(online) == 3
	})
	expect(t, n[0].guest(t, "GET", "/api/health/checks/node-is-quorum-critical", nil), http.StatusOK, "not critical with three members")
	stopped := n[2].Name()
	n[2].Stop()
	eventually(t, "node 0 quorum-critical", func() bool {
		return n[0].guest(t, "GET", "/api/health/checks/node-is-quorum-critical", nil).status == http.StatusServiceUnavailable
	})
	r := n[0].guest(t, "GET", "/api/health/checks/node-is-quorum-critical", nil)
	m := r.object(t)
	qs, _ := m["queues"].([]any)
	if m["status"] != "failed" || len(qs) == 0 {
		t.Fatalf("quorum-critical check: %s", r.body)
	}
	r = n[0].guest(t, "GET", "/api/nodes/"+stopped, nil)
	expect(t, r, http.StatusOK, "a stopped node")
	eventually(t, "node 2 shown stopped", func() bool {
		return n[0].guest(t, "GET", "/api/nodes/"+stopped, nil).object(t)["running"] == false
	})
}

func splitPort(addr string) (string, string, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			if _, err := strconv.Atoi(addr[i+1:]); err != nil {
				return "", "", err
			}
			return addr[:i], addr[i+1:], nil
		}
	}
	return addr, "", nil
}
