package management_test

import (
	"net/http"
	"testing"
)

func testLimits(t *testing.T, n []*apiNode) {
	expect(t, n[0].guest(t, "PUT", "/api/vhosts/limited", map[string]any{}), http.StatusCreated, "create vhost")
	expect(t, n[0].guest(t, "PUT", "/api/permissions/limited/guest", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}), http.StatusCreated, "grant guest")
	expect(t, n[0].guest(t, "PUT", "/api/vhost-limits/limited/max-queues", map[string]any{"value": 1}), http.StatusNoContent, "set max-queues")
	expect(t, n[0].guest(t, "PUT", "/api/vhost-limits/limited/max-connections", map[string]any{"value": "50"}), http.StatusNoContent, "set max-connections")
	expectError(t, n[0].guest(t, "PUT", "/api/vhost-limits/limited/max-queues", map[string]any{"value": "many"}), http.StatusBadRequest, "bad_request", "a limit that is not a number")
	expectError(t, n[0].guest(t, "PUT", "/api/vhost-limits/nohost/max-queues", map[string]any{"value": 1}), http.StatusNotFound, "Object Not Found", "a limit of a missing vhost")

	r := n[0].guest(t, "GET", "/api/vhost-limits/limited", nil)
	expect(t, r, http.StatusOK, "vhost limits")
	l := r.list(t)
	if len(l) != 1 || l[0]["value"].(map[string]any)["max-queues"] != float64(1) || l[0]["value"].(map[string]any)["max-connections"] != float64(50) {
		t.Fatalf("limits: %s", r.body)
	}

	// The broker holds the vhost to its limit for what the API declares.
	expect(t, n[0].guest(t, "PUT", "/api/queues/limited/one", map[string]any{}), http.StatusCreated, "first queue")
	expectError(t, n[0].guest(t, "PUT", "/api/queues/limited/two", map[string]any{}), http.StatusBadRequest, "bad_request", "a queue over the limit")
	expect(t, n[0].guest(t, "DELETE", "/api/vhost-limits/limited/max-queues", nil), http.StatusNoContent, "clear max-queues")
	expectError(t, n[0].guest(t, "DELETE", "/api/vhost-limits/limited/max-queues", nil), http.StatusNotFound, "Object Not Found", "clear it again")
	expect(t, n[0].guest(t, "PUT", "/api/queues/limited/two", map[string]any{}), http.StatusCreated, "a queue once the limit is gone")

	expect(t, n[0].guest(t, "PUT", "/api/user-limits/guest/max-channels", map[string]any{"value": 100}), http.StatusNoContent, "set a user limit")
	r = n[0].guest(t, "GET", "/api/user-limits/guest", nil)
	expect(t, r, http.StatusOK, "user limits")
	if l := r.list(t); len(l) != 1 || l[0]["value"].(map[string]any)["max-channels"] != float64(100) {
		t.Fatalf("user limits: %s", r.body)
	}
	expect(t, n[0].guest(t, "DELETE", "/api/user-limits/guest/max-channels", nil), http.StatusNoContent, "clear the user limit")
	expect(t, n[0].guest(t, "DELETE", "/api/vhosts/limited", nil), http.StatusNoContent, "delete vhost")
}
