package management_test

import (
	"net/http"
	"testing"
)

func testBadInput(t *testing.T, n []*apiNode) {
	// Malformed JSON is a 400 and creates nothing.
	expectError(t, n[0].guest(t, "PUT", "/api/queues/%2F/malformed", `{"durable": tru`), http.StatusBadRequest, "bad_request", "malformed queue")
	expectError(t, n[0].guest(t, "GET", "/api/queues/%2F/malformed", nil), http.StatusNotFound, "Object Not Found", "queue after malformed PUT")
	expectError(t, n[0].guest(t, "PUT", "/api/queues/%2F/malformed", map[string]any{"durable": "perhaps"}), http.StatusBadRequest, "bad_request", "non-boolean durable")
	expectError(t, n[0].guest(t, "PUT", "/api/queues/%2F/malformed", map[string]any{"arguments": 7}), http.StatusBadRequest, "bad_request", "arguments not an object")
	expectError(t, n[0].guest(t, "GET", "/api/queues/%2F/malformed", nil), http.StatusNotFound, "Object Not Found", "queue after bad PUTs")
	expectError(t, n[0].guest(t, "PUT", "/api/exchanges/%2F/malformed", map[string]any{"durable": true}), http.StatusBadRequest, "bad_request", "exchange without type")
	expectError(t, n[0].guest(t, "PUT", "/api/users/malformed", `[1,2`), http.StatusBadRequest, "bad_request", "malformed user")
	expectError(t, n[0].guest(t, "GET", "/api/users/malformed", nil), http.StatusNotFound, "Object Not Found", "user after malformed PUT")
	expectError(t, n[0].guest(t, "POST", "/api/definitions", `{"queues": [`), http.StatusBadRequest, "bad_request", "malformed definitions")
	expectError(t, n[0].guest(t, "POST", "/api/exchanges/%2F/amq.default/publish", map[string]any{"routing_key": "q", "payload": "!!", "payload_encoding": "base64", "properties": map[string]any{}}), http.StatusBadRequest, "bad_request", "payload not base64")
	expectError(t, n[0].guest(t, "POST", "/api/exchanges/%2F/amq.default/publish", map[string]any{"payload": "x"}), http.StatusBadRequest, "bad_request", "publish without routing key")
	expectError(t, n[0].guest(t, "POST", "/api/exchanges/%2F/amq.default/publish", map[string]any{"routing_key": "q", "payload": "x", "properties": map[string]any{"delivery_mode": 9}}), http.StatusBadRequest, "bad_request", "bad delivery mode")

	// Wrong methods are 405 with Allow, before any credentials.
	r := call(t, "POST", n[1].url+"/api/overview", "", "", nil)
	expect(t, r, http.StatusMethodNotAllowed, "POST overview")
	if r.header.Get("Allow") != "GET" {
		t.Fatalf("Allow %q", r.header.Get("Allow"))
	}
	expect(t, n[1].guest(t, "PATCH", "/api/queues/%2F/x", nil), http.StatusMethodNotAllowed, "PATCH queue")

	// Unknown paths are RabbitMQ's 404.
	expectError(t, n[2].guest(t, "GET", "/api/no-such-thing", nil), http.StatusNotFound, "Object Not Found", "unknown path")
	expectError(t, n[2].guest(t, "GET", "/api/queues/%2F/x/y/z/w", nil), http.StatusNotFound, "Object Not Found", "too deep a path")
	expectError(t, n[2].guest(t, "GET", "/api/health/checks/port-listener/notaport", nil), http.StatusBadRequest, "bad_request", "port not a number")
}
