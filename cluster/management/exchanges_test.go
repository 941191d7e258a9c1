package management_test

import (
	"net/http"
	"net/url"
	"testing"
)

func testExchangesAndBindings(t *testing.T, nodes []*apiNode) {
	expect(t, nodes[0].guest(t, "PUT", "/api/exchanges/%2F/events", map[string]any{"type": "topic", "durable": "true", "auto_delete": "false", "internal": "false", "arguments": map[string]any{}}), http.StatusCreated, "declare exchange")
	expect(t, nodes[0].guest(t, "PUT", "/api/exchanges/%2F/events", map[string]any{"type": "topic"}), http.StatusNoContent, "declare again")
	expectError(t, nodes[0].guest(t, "PUT", "/api/exchanges/%2F/events", map[string]any{"type": "fanout"}), http.StatusBadRequest, "bad_request", "inequivalent type")
	seen(t, nodes[1], "/api/exchanges/%2F/events")
	seen(t, nodes[2], "/api/exchanges/%2F/events")
	r := nodes[1].guest(t, "GET", "/api/exchanges/%2F/events", nil)
	expect(t, r, http.StatusOK, "get exchange")
	if e := r.object(t); e["type"] != "topic" || e["durable"] != true || e["vhost"] != "/" {
		t.Fatalf("exchange: %s", r.body)
	}
	r = nodes[2].guest(t, "GET", "/api/exchanges/%2F", nil)
	expect(t, r, http.StatusOK, "list exchanges")
	names := field(r.list(t), "name")
	if !contains(names, "") || !contains(names, "amq.topic") || !contains(names, "events") {
		t.Fatalf("exchanges: %v", names)
	}
	expect(t, nodes[2].guest(t, "GET", "/api/exchanges/%2F/amq.default", nil), http.StatusOK, "the default exchange by its path name")

	expect(t, nodes[0].guest(t, "PUT", "/api/queues/%2F/audit", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum"}}), http.StatusCreated, "declare queue")
	seen(t, nodes[1], "/api/queues/%2F/audit")
	r = nodes[1].guest(t, "POST", "/api/bindings/%2F/e/events/q/audit", map[string]any{"routing_key": "order.*", "arguments": map[string]any{}})
	expect(t, r, http.StatusCreated, "bind")
	if loc, _ := url.PathUnescape(r.header.Get("Location")); loc != "order.*" {
		t.Fatalf("binding location %q", r.header.Get("Location"))
	}
	seen(t, nodes[2], "/api/bindings/%2F/e/events/q/audit/order.*")
	seen(t, nodes[0], "/api/bindings/%2F/e/events/q/audit/order.*")
	r = nodes[2].guest(t, "GET", "/api/exchanges/%2F/events/bindings/source", nil)
	expect(t, r, http.StatusOK, "source bindings")
	if bs := r.list(t); len(bs) != 1 || bs[0]["destination"] != "audit" || bs[0]["routing_key"] != "order.*" || bs[0]["properties_key"] != "order.*" {
		t.Fatalf("bindings of events: %s", r.body)
	}
	r = nodes[2].guest(t, "GET", "/api/queues/%2F/audit/bindings", nil)
	expect(t, r, http.StatusOK, "queue bindings")
	if bs := r.list(t); len(bs) != 2 { // the default exchange's and events'
		t.Fatalf("bindings of audit: %s", r.body)
	}
	expect(t, nodes[0].guest(t, "GET", "/api/bindings/%2F/e/events/q/audit/order.*", nil), http.StatusOK, "one binding")

	publish := func(n *apiNode, key string) bool {
		r := n.guest(t, "POST", "/api/exchanges/%2F/events/publish", map[string]any{"routing_key": key, "payload": "e", "payload_encoding": "string", "properties": map[string]any{}})
		expect(t, r, http.StatusOK, "publish to events")
		return r.object(t)["routed"] == true
	}
	if !publish(nodes[2], "order.created") {
		t.Fatal("a matching publish was not routed")
	}
	if publish(nodes[2], "invoice.created") {
		t.Fatal("a publish no binding matches was routed")
	}

	expect(t, nodes[2].guest(t, "DELETE", "/api/bindings/%2F/e/events/q/audit/order.*", nil), http.StatusNoContent, "unbind")
	expectError(t, nodes[2].guest(t, "DELETE", "/api/bindings/%2F/e/events/q/audit/order.*", nil), http.StatusNotFound, "Object Not Found", "unbind again")
	eventually(t, "the unbinding on node 0", func() bool {
		return nodes[0].guest(t, "GET", "/api/bindings/%2F/e/events/q/audit/order.*", nil).status == http.StatusNotFound
	})
	if publish(nodes[0], "order.created") {
		t.Fatal("routed after unbinding")
	}
	expectError(t, nodes[0].guest(t, "GET", "/api/bindings/%2F/e/events/x/audit", nil), http.StatusNotFound, "Object Not Found", "unknown destination type")

	expect(t, nodes[1].guest(t, "DELETE", "/api/exchanges/%2F/events", nil), http.StatusNoContent, "delete exchange")
	eventually(t, "the exchange gone on node 0", func() bool {
		return nodes[0].guest(t, "GET", "/api/exchanges/%2F/events", nil).status == http.StatusNotFound
	})
	expect(t, nodes[0].guest(t, "DELETE", "/api/queues/%2F/audit", nil), http.StatusNoContent, "delete queue")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
