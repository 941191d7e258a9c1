package management_test

import (
	"net/http"
	"strings"
	"testing"
)

func testDefinitionsAndPolicies(t *testing.T, n []*apiNode) {
	expect(t, n[0].guest(t, "PUT", "/api/policies/%2F/cap", map[string]any{"pattern": "^capped\\.", "definition": map[string]any{"max-length": 10}, "priority": 1, "apply-to": "queues"}), http.StatusCreated, "set policy")
	seen(t, n[1], "/api/policies/%2F/cap")
	r := n[1].guest(t, "GET", "/api/policies/%2F/cap", nil)
	expect(t, r, http.StatusOK, "get policy")
	if p := r.object(t); p["apply-to"] != "queues" || p["definition"].(map[string]any)["max-length"] != float64(10) || p["priority"] != float64(1) {
		t.Fatalf("policy: %s", r.body)
	}
	expectError(t, n[0].guest(t, "PUT", "/api/policies/%2F/bad", map[string]any{"pattern": ".*", "definition": map[string]any{"no-such-key": 1}}), http.StatusBadRequest, "bad_request", "invalid policy")
	expectError(t, n[0].guest(t, "GET", "/api/policies/%2F/bad", nil), http.StatusNotFound, "Object Not Found", "refused policy")
	expect(t, n[0].guest(t, "PUT", "/api/operator-policies/%2F/ops", map[string]any{"pattern": ".*", "definition": map[string]any{"max-length": 1000}, "apply-to": "queues"}), http.StatusCreated, "set operator policy")
	seen(t, n[2], "/api/operator-policies/%2F/ops")

	// Export from one node, delete, import on another: it comes back.
	expect(t, n[0].guest(t, "PUT", "/api/queues/%2F/defs-q", map[string]any{"arguments": map[string]any{"x-queue-type": "quorum"}}), http.StatusCreated, "declare")
	seen(t, n[2], "/api/queues/%2F/defs-q")
	r = n[2].guest(t, "GET", "/api/definitions", nil)
	expect(t, r, http.StatusOK, "export")
	doc := string(r.body)
	if !strings.Contains(doc, `"defs-q"`) || !strings.Contains(doc, `"cap"`) {
		t.Fatalf("export lacks the queue or policy: %s", doc)
	}
	expect(t, n[0].guest(t, "DELETE", "/api/queues/%2F/defs-q", nil), http.StatusNoContent, "delete queue")
	expect(t, n[0].guest(t, "DELETE", "/api/policies/%2F/cap", nil), http.StatusNoContent, "delete policy")
	expectError(t, n[0].guest(t, "DELETE", "/api/policies/%2F/cap", nil), http.StatusNotFound, "Object Not Found", "delete policy again")
	expect(t, n[1].guest(t, "POST", "/api/definitions", doc), http.StatusNoContent, "import")
	seen(t, n[1], "/api/queues/%2F/defs-q")
	seen(t, n[1], "/api/policies/%2F/cap")

	expect(t, n[0].guest(t, "DELETE", "/api/queues/%2F/defs-q", nil), http.StatusNoContent, "clean up queue")
	expect(t, n[0].guest(t, "DELETE", "/api/policies/%2F/cap", nil), http.StatusNoContent, "clean up policy")
	expect(t, n[0].guest(t, "DELETE", "/api/operator-policies/%2F/ops", nil), http.StatusNoContent, "clean up operator policy")
}
