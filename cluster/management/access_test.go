package management_test

import (
	"net/http"
	"testing"
)

func testAccess(t *testing.T, n []*apiNode) {
	expect(t, n[0].guest(t, "PUT", "/api/vhosts/shop", map[string]any{"default_queue_type": "quorum"}), http.StatusCreated, "create vhost")
	expect(t, n[0].guest(t, "PUT", "/api/vhosts/shop", map[string]any{}), http.StatusNoContent, "create vhost again")
	seen(t, n[1], "/api/vhosts/shop")
	r := n[1].guest(t, "GET", "/api/vhosts/shop", nil)
	expect(t, r, http.StatusOK, "get vhost")
	if v := r.object(t); v["name"] != "shop" || v["default_queue_type"] != "quorum" {
		t.Fatalf("vhost: %s", r.body)
	}

	expect(t, n[1].guest(t, "PUT", "/api/users/alice", map[string]any{"password": "a1", "tags": "management,policymaker"}), http.StatusCreated, "create user")
	seen(t, n[2], "/api/users/alice")
	r = n[2].guest(t, "GET", "/api/users/alice", nil)
	expect(t, r, http.StatusOK, "get user")
	if u := r.object(t); len(toStrings(u["tags"])) != 2 {
		t.Fatalf("user: %s", r.body)
	}
	expect(t, n[2].guest(t, "PUT", "/api/users/alice", map[string]any{"password": "a2", "tags": []string{"management"}}), http.StatusNoContent, "change user")
	eventually(t, "alice's new password on node 0", func() bool {
		return call(t, "GET", n[0].url+"/api/whoami", "alice", "a2", nil).status == http.StatusOK
	})
	expectError(t, call(t, "GET", n[0].url+"/api/whoami", "alice", "a1", nil), http.StatusUnauthorized, "not_authorised", "alice with her old password")
	expectError(t, n[2].guest(t, "PUT", "/api/users/bob", map[string]any{"password_hash": "abc", "tags": ""}), http.StatusBadRequest, "bad_request", "password hash")
	expectError(t, n[2].guest(t, "GET", "/api/users/bob", nil), http.StatusNotFound, "Object Not Found", "refused user")

	perm := map[string]any{"configure": "^alice-", "write": ".*", "read": ".*"}
	expect(t, n[0].guest(t, "PUT", "/api/permissions/shop/alice", perm), http.StatusCreated, "grant")
	seen(t, n[1], "/api/permissions/shop/alice")
	seen(t, n[2], "/api/permissions/shop/alice")
	r = n[1].guest(t, "GET", "/api/permissions/shop/alice", nil)
	expect(t, r, http.StatusOK, "get permission")
	if p := r.object(t); p["configure"] != "^alice-" || p["user"] != "alice" || p["vhost"] != "shop" {
		t.Fatalf("permission: %s", r.body)
	}
	r = n[1].guest(t, "GET", "/api/users/alice/permissions", nil)
	expect(t, r, http.StatusOK, "user's permissions")
	if len(r.list(t)) != 1 {
		t.Fatalf("alice's permissions: %s", r.body)
	}
	expectError(t, n[0].guest(t, "PUT", "/api/permissions/shop/alice", map[string]any{"configure": ".*"}), http.StatusBadRequest, "bad_request", "permission without write and read")
	expectError(t, n[0].guest(t, "PUT", "/api/permissions/nohost/alice", perm), http.StatusNotFound, "Object Not Found", "permission in a missing vhost")

	// Her permissions hold over the API: configure only ^alice-.
	expectError(t, call(t, "PUT", n[2].url+"/api/queues/shop/other", "alice", "a2", map[string]any{}), http.StatusUnauthorized, "not_authorised", "declare outside her configure pattern")
	expect(t, call(t, "PUT", n[2].url+"/api/queues/shop/alice-q", "alice", "a2", map[string]any{}), http.StatusCreated, "declare within her pattern")

	expect(t, n[0].guest(t, "DELETE", "/api/permissions/shop/alice", nil), http.StatusNoContent, "revoke")
	expectError(t, n[0].guest(t, "DELETE", "/api/permissions/shop/alice", nil), http.StatusNotFound, "Object Not Found", "revoke again")
	expect(t, n[0].guest(t, "DELETE", "/api/users/alice", nil), http.StatusNoContent, "delete user")
	expectError(t, n[0].guest(t, "DELETE", "/api/users/alice", nil), http.StatusNotFound, "Object Not Found", "delete user again")
	expect(t, n[1].guest(t, "DELETE", "/api/vhosts/shop", nil), http.StatusNoContent, "delete vhost")
	expectError(t, n[1].guest(t, "DELETE", "/api/vhosts/shop", nil), http.StatusNotFound, "Object Not Found", "delete vhost again")

	r = n[0].guest(t, "GET", "/api/topic-permissions", nil)
	expect(t, r, http.StatusOK, "topic permissions")
	expectError(t, n[0].guest(t, "PUT", "/api/topic-permissions/%2F/guest", map[string]any{"exchange": "amq.topic", "write": ".*", "read": ".*"}), http.StatusBadRequest, "bad_request", "set a topic permission")
}
