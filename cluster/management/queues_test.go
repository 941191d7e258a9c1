package management_test

import (
	"net/http"
	"testing"
)

// queue is a queue as the API shows it, read from node n.
func queue(t *testing.T, n *apiNode, path string) map[string]any {
	t.Helper()
	r := n.guest(t, "GET", path, nil)
	expect(t, r, http.StatusOK, "GET "+path)
	return r.object(t)
}

func testQueues(t *testing.T, nodes []*apiNode) {
	const path = "/api/queues/%2F/orders"
	r := nodes[0].guest(t, "PUT", path, map[string]any{"durable": true, "auto_delete": false, "arguments": map[string]any{"x-queue-type": "quorum", "x-max-length": 100}})
	expect(t, r, http.StatusCreated, "declare quorum queue")
	expect(t, nodes[0].guest(t, "PUT", path, map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum", "x-max-length": 100}}), http.StatusNoContent, "declare again")

	// Every node answers with the quorum fields.
	eventually(t, "the queue's leader and members on node 2", func() bool {
		q := queue(t, nodes[2], path)
		members, _ := q["members"].([]any)
		online, _ := q["online"].([]any)
		return q["type"] == "quorum" && q["leader"] != "" && q["leader"] != nil && len(members) == 3 && len(online) == 3
	})
	q := queue(t, nodes[1], path)
	if q["durable"] != true || q["arguments"].(map[string]any)["x-max-length"] != float64(100) {
		t.Fatalf("queue's declaration: %v", q)
	}

	// An inequivalent redeclaration is refused and changes nothing.
	r = nodes[1].guest(t, "PUT", path, map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum", "x-max-length": 5}})
	expectError(t, r, http.StatusBadRequest, "bad_request", "inequivalent declaration")
	if q := queue(t, nodes[0], path); q["arguments"].(map[string]any)["x-max-length"] != float64(100) {
		t.Fatalf("a refused declaration changed the queue: %v", q)
	}

	// Publish through the default exchange on another node, then count.
	r = nodes[1].guest(t, "POST", "/api/exchanges/%2F/amq.default/publish", map[string]any{
		"routing_key": "orders", "payload": "first", "payload_encoding": "string",
		"properties": map[string]any{"delivery_mode": 2, "headers": map[string]any{"k": "v"}},
	})
	expect(t, r, http.StatusOK, "publish")
	if r.object(t)["routed"] != true {
		t.Fatalf("publish to an existing queue not routed: %s", r.body)
	}
	eventually(t, "one message counted", func() bool {
		q := queue(t, nodes[2], path)
		return q["messages"] == float64(1) && q["messages_ready"] == float64(1)
	})

	// Get and requeue: the message stays, redelivered next time.
	r = nodes[2].guest(t, "POST", path+"/get", map[string]any{"count": 5, "ackmode": "ack_requeue_true", "encoding": "auto"})
	expect(t, r, http.StatusOK, "get requeue")
	got := r.list(t)
	if len(got) != 1 || got[0]["payload"] != "first" || got[0]["payload_encoding"] != "string" || got[0]["routing_key"] != "orders" {
		t.Fatalf("get: %s", r.body)
	}
	if h := got[0]["properties"].(map[string]any)["headers"].(map[string]any); h["k"] != "v" {
		t.Fatalf("get lost the headers: %s", r.body)
	}
	// Bad input to get is refused before anything is taken.
	expectError(t, nodes[2].guest(t, "POST", path+"/get", map[string]any{"count": 1, "ackmode": "keep"}), http.StatusBadRequest, "bad_request", "unknown ackmode")
	r = nodes[0].guest(t, "POST", path+"/get", map[string]any{"count": "1", "ackmode": "ack_requeue_false", "encoding": "base64"})
	expect(t, r, http.StatusOK, "get ack")
	got = r.list(t)
	if len(got) != 1 || got[0]["redelivered"] != true || got[0]["payload"] != "Zmlyc3Q=" {
		t.Fatalf("second get: %s", r.body)
	}
	eventually(t, "the queue empty", func() bool { return queue(t, nodes[1], path)["messages"] == float64(0) })

	// Contents purges.
	nodes[0].guest(t, "POST", "/api/exchanges/%2F/amq.default/publish", map[string]any{"routing_key": "orders", "payload": "x", "payload_encoding": "string", "properties": map[string]any{}})
	eventually(t, "a message to purge", func() bool { return queue(t, nodes[0], path)["messages"] == float64(1) })
	expect(t, nodes[2].guest(t, "DELETE", path+"/contents", nil), http.StatusNoContent, "purge")
	eventually(t, "the queue purged", func() bool { return queue(t, nodes[0], path)["messages"] == float64(0) })

	// A message to a queue that does not exist is not routed.
	r = nodes[0].guest(t, "POST", "/api/exchanges/%2F/amq.default/publish", map[string]any{"routing_key": "nowhere", "payload": "x", "payload_encoding": "string", "properties": map[string]any{}})
	expect(t, r, http.StatusOK, "publish unroutable")
	if r.object(t)["routed"] != false {
		t.Fatalf("unroutable publish said routed: %s", r.body)
	}

	// As in RabbitMQ, quorum queues refuse if-unused and if-empty.
	expectError(t, nodes[1].guest(t, "DELETE", path+"?if-unused=true", nil), http.StatusBadRequest, "bad_request", "delete if-unused")
	expectError(t, nodes[1].guest(t, "DELETE", path+"?if-empty=true", nil), http.StatusBadRequest, "bad_request", "delete if-empty")
	queue(t, nodes[0], path) // still there
	expect(t, nodes[1].guest(t, "DELETE", path, nil), http.StatusNoContent, "delete")
	expectError(t, nodes[0].guest(t, "GET", path, nil), http.StatusNotFound, "Object Not Found", "deleted queue")
	expectError(t, nodes[0].guest(t, "DELETE", path, nil), http.StatusNotFound, "Object Not Found", "delete missing queue")
	expectError(t, nodes[0].guest(t, "GET", "/api/queues/nohost", nil), http.StatusNotFound, "Object Not Found", "queues of a missing vhost")
	testClassicIfEmpty(t, nodes[2])
}

// A classic queue takes if-empty: refused while a message is there.
func testClassicIfEmpty(t *testing.T, n *apiNode) {
	const path = "/api/queues/%2F/scratch"
	expect(t, n.guest(t, "PUT", path, map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "classic"}}), http.StatusCreated, "declare classic")
	if q := queue(t, n, path); q["type"] != "classic" {
		t.Fatalf("classic queue: %v", q)
	}
	n.guest(t, "POST", "/api/exchanges/%2F/amq.default/publish", map[string]any{"routing_key": "scratch", "payload": "x", "payload_encoding": "string", "properties": map[string]any{}})
	eventually(t, "a message in the classic queue", func() bool { return queue(t, n, path)["messages"] == float64(1) })
	expectError(t, n.guest(t, "DELETE", path+"?if-empty=true", nil), http.StatusBadRequest, "bad_request", "delete a full queue if-empty")
	queue(t, n, path) // still there
	expect(t, n.guest(t, "DELETE", path, nil), http.StatusNoContent, "delete classic")
}
