package management_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/management"
	"github.com/warrenmq/warren/cluster/node/nodetest"
)

// apiNode is one node of a test cluster with its management API served
// on a real loopback port.
type apiNode struct {
	*nodetest.Member
	url string
}

// startAPICluster starts a real 3-node cluster and serves the management
// API of each node.
func startAPICluster(t *testing.T) []*apiNode {
	t.Helper()
	members := nodetest.StartCluster(t, 3)
	out := make([]*apiNode, len(members))
	for i, m := range members {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		api := management.New(management.NodeConfig(m.Node, "test", ln.Addr(), false, log))
		srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: api}}
		srv.Start()
		t.Cleanup(srv.Close)
		out[i] = &apiNode{Member: m, url: srv.URL}
	}
	return out
}

// reply is an HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into v, failing the test if it is not JSON.
func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d is not JSON (%v): %s", r.status, err, r.body)
	}
}

func (r reply) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	r.json(t, &m)
	return m
}

func (r reply) list(t *testing.T) []map[string]any {
	t.Helper()
	var l []map[string]any
	r.json(t, &l)
	return l
}

// call makes a request as user (none when user is "") with body (a
// string is sent as is, anything else as JSON).
func call(t *testing.T, method, url, user, pass string, body any) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// guest calls as the seeded administrator.
func (n *apiNode) guest(t *testing.T, method, path string, body any) reply {
	t.Helper()
	return call(t, method, n.url+path, "guest", "guest", body)
}

// expect fails the test unless r has status.
func expect(t *testing.T, r reply, status int, what string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.status, status, r.body)
	}
}

// expectError fails the test unless r is RabbitMQ's error answer with
// status and error kind.
func expectError(t *testing.T, r reply, status int, kind, what string) {
	t.Helper()
	expect(t, r, status, what)
	m := r.object(t)
	if m["error"] != kind || m["reason"] == nil || m["reason"] == "" {
		t.Fatalf("%s: body %s, want error %q with a reason", what, r.body, kind)
	}
}

// eventually polls cond until it holds or the time is up.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// seen waits until node n's copy of the metadata shows path (a change
// is applied on the node that made it first, on the others a moment
// later).
func seen(t *testing.T, n *apiNode, path string) {
	t.Helper()
	eventually(t, path+" on "+n.Name(), func() bool { return n.guest(t, "GET", path, nil).status == http.StatusOK })
}

// seen404 waits until node n no longer shows path.
func seen404(t *testing.T, n *apiNode, path string) {
	t.Helper()
	eventually(t, path+" gone on "+n.Name(), func() bool { return n.guest(t, "GET", path, nil).status == http.StatusNotFound })
}
