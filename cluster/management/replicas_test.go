package management_test

import (
	"net/http"
	"testing"
)

func testReplicas(t *testing.T, n []*apiNode) {
	const path = "/api/queues/%2F/replicated"
	expect(t, n[0].guest(t, "PUT", path, map[string]any{"arguments": map[string]any{"x-queue-type": "quorum"}}), http.StatusCreated, "declare")
	for _, node := range n {
		seen(t, node, path)
	}
	members := func(from *apiNode) []string { return toStrings(queue(t, from, path)["members"]) }
	eventually(t, "three members", func() bool { return len(members(n[1])) == 3 })
	target := members(n[1])[0]

	expect(t, n[1].guest(t, "DELETE", "/api/queues/quorum/%2F/replicated/replicas/delete", map[string]any{"node": target}), http.StatusNoContent, "delete replica")
	eventually(t, "two members", func() bool { return len(members(n[2])) == 2 && !contains(members(n[2]), target) })
	expect(t, n[2].guest(t, "POST", "/api/queues/quorum/%2F/replicated/replicas/add", map[string]any{"node": target}), http.StatusNoContent, "add replica")
	eventually(t, "three members again", func() bool { return len(members(n[0])) == 3 })

	expectError(t, n[2].guest(t, "POST", "/api/queues/quorum/%2F/replicated/replicas/add", map[string]any{}), http.StatusBadRequest, "bad_request", "add without a node")
	expectError(t, n[2].guest(t, "POST", "/api/queues/quorum/%2F/nothing/replicas/add", map[string]any{"node": target}), http.StatusNotFound, "Object Not Found", "add to a missing queue")
	expectError(t, call(t, "POST", n[2].url+"/api/queues/quorum/%2F/replicated/replicas/add", "watcher", "w", map[string]any{"node": target}), http.StatusUnauthorized, "not_authorised", "monitoring adds a replica")

	r := n[0].guest(t, "POST", "/api/rebalance/queues", nil)
	expect(t, r, http.StatusOK, "rebalance")
	if _, ok := r.object(t)["moves"]; !ok {
		t.Fatalf("rebalance: %s", r.body)
	}
	expect(t, n[0].guest(t, "DELETE", path, nil), http.StatusNoContent, "delete")
}
