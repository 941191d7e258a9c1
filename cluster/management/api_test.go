package management_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp/server"
)

// TestManagementAPI drives every endpoint family against one real
// 3-node cluster, asking different nodes to show that each answers for
// the whole cluster.
func TestManagementAPI(t *testing.T) {
	nodes := startAPICluster(t)
	t.Run("Authentication", func(t *testing.T) { testAuthentication(t, nodes) })
	t.Run("OverviewAndNodes", func(t *testing.T) { testOverviewAndNodes(t, nodes) })
	t.Run("Queues", func(t *testing.T) { testQueues(t, nodes) })
	t.Run("ExchangesAndBindings", func(t *testing.T) { testExchangesAndBindings(t, nodes) })
	t.Run("Access", func(t *testing.T) { testAccess(t, nodes) })
	t.Run("Limits", func(t *testing.T) { testLimits(t, nodes) })
	t.Run("ListingShape", func(t *testing.T) { testListingShape(t, nodes) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, nodes) })
	t.Run("Clients", func(t *testing.T) { testClients(t, nodes) })
	t.Run("DefinitionsAndPolicies", func(t *testing.T) { testDefinitionsAndPolicies(t, nodes) })
	t.Run("HealthChecks", func(t *testing.T) { testHealthChecks(t, nodes) })
	t.Run("Replicas", func(t *testing.T) { testReplicas(t, nodes) })
	t.Run("Rabbitmqadmin", func(t *testing.T) { testRabbitmqadmin(t, nodes) })
	t.Run("QuorumCritical", func(t *testing.T) { testQuorumCritical(t, nodes) })
}

func testAuthentication(t *testing.T, nodes []*apiNode) {
	n := nodes[0]
	r := call(t, "GET", n.url+"/api/overview", "", "", nil)
	expectError(t, r, http.StatusUnauthorized, "not_authorised", "no credentials")
	if r.header.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}
	r = call(t, "GET", n.url+"/api/overview", "guest", "wrong", nil)
	expectError(t, r, http.StatusUnauthorized, "not_authorised", "wrong password")
	if r.header.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}

	// Failed logins slow the next attempts from the address, as over
	// AMQP: after two, the third waits twice the first delay.
	call(t, "GET", n.url+"/api/overview", "guest", "wrong", nil)
	start := time.Now()
	expectError(t, call(t, "GET", n.url+"/api/overview", "guest", "wrong", nil), http.StatusUnauthorized, "not_authorised", "a guess after failures")
	if took := time.Since(start); took < 2*server.DefaultLoginFailureDelay {
		t.Fatalf("a login after failures took %v, want at least %v", took, 2*server.DefaultLoginFailureDelay)
	}
	expect(t, n.guest(t, "GET", "/api/whoami", nil), http.StatusOK, "a right login clears the failures")

	// A user without a management tag may not use the API at all.
	expect(t, n.guest(t, "PUT", "/api/users/plain", map[string]any{"password": "p", "tags": ""}), http.StatusCreated, "create plain user")
	r = call(t, "GET", n.url+"/api/whoami", "plain", "p", nil)
	expectError(t, r, http.StatusUnauthorized, "not_authorised", "user without tags")

	// monitoring reads everything, changes nothing.
	expect(t, n.guest(t, "PUT", "/api/users/watcher", map[string]any{"password": "w", "tags": "monitoring"}), http.StatusCreated, "create monitoring user")
	who := call(t, "GET", n.url+"/api/whoami", "watcher", "w", nil)
	expect(t, who, http.StatusOK, "whoami")
	if m := who.object(t); m["name"] != "watcher" || !slices.Equal(toStrings(m["tags"]), []string{"monitoring"}) {
		t.Fatalf("whoami: %s", who.body)
	}
	expect(t, call(t, "GET", n.url+"/api/nodes", "watcher", "w", nil), http.StatusOK, "monitoring lists nodes")
	r = call(t, "PUT", n.url+"/api/vhosts/watched", "watcher", "w", map[string]any{})
	expectError(t, r, http.StatusUnauthorized, "not_authorised", "monitoring creates a vhost")
	if r := n.guest(t, "GET", "/api/vhosts/watched", nil); r.status != http.StatusNotFound {
		t.Fatalf("a refused PUT created the vhost: %d %s", r.status, r.body)
	}

	// management sees only the vhosts it has permissions in.
	expect(t, n.guest(t, "PUT", "/api/vhosts/own", map[string]any{}), http.StatusCreated, "create vhost own")
	expect(t, n.guest(t, "PUT", "/api/users/mgr", map[string]any{"password": "m", "tags": []string{"management"}}), http.StatusCreated, "create management user")
	expect(t, n.guest(t, "PUT", "/api/permissions/own/mgr", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}), http.StatusCreated, "grant mgr")
	eventually(t, "mgr's permissions on node 0", func() bool {
		return call(t, "GET", n.url+"/api/vhosts/own", "mgr", "m", nil).status == http.StatusOK
	})
	vs := call(t, "GET", n.url+"/api/vhosts", "mgr", "m", nil)
	expect(t, vs, http.StatusOK, "mgr lists vhosts")
	if names := field(vs.list(t), "name"); !slices.Equal(names, []string{"own"}) {
		t.Fatalf("management user sees vhosts %v, want [own]", names)
	}
	expectError(t, call(t, "GET", n.url+"/api/queues/%2F", "mgr", "m", nil), http.StatusUnauthorized, "not_authorised", "mgr reads another vhost")
	expectError(t, call(t, "GET", n.url+"/api/nodes", "mgr", "m", nil), http.StatusUnauthorized, "not_authorised", "mgr lists nodes")
	// The broker checks the caller's permissions on what is done over AMQP.
	r = call(t, "PUT", n.url+"/api/queues/%2F/mgr-q", "mgr", "m", map[string]any{"durable": true})
	expectError(t, r, http.StatusUnauthorized, "not_authorised", "mgr declares in another vhost")
	expect(t, call(t, "PUT", n.url+"/api/queues/own/mgr-q", "mgr", "m", map[string]any{"durable": true}), http.StatusCreated, "mgr declares in its vhost")

	// A user who may read but not write in / cannot publish there.
	expect(t, n.guest(t, "PUT", "/api/users/reader", map[string]any{"password": "r", "tags": "management"}), http.StatusCreated, "create reader")
	expect(t, n.guest(t, "PUT", "/api/permissions/%2F/reader", map[string]any{"configure": "", "write": "", "read": ".*"}), http.StatusCreated, "grant reader")
	eventually(t, "reader's permissions on node 0", func() bool {
		return call(t, "GET", n.url+"/api/vhosts/%2F", "reader", "r", nil).status == http.StatusOK
	})
	r = call(t, "POST", n.url+"/api/exchanges/%2F/amq.direct/publish", "reader", "r", map[string]any{"routing_key": "k", "payload": "x", "payload_encoding": "string", "properties": map[string]any{}})
	expectError(t, r, http.StatusUnauthorized, "not_authorised", "publish without write permission")
}

func testOverviewAndNodes(t *testing.T, nodes []*apiNode) {
	for _, n := range nodes {
		ov := n.guest(t, "GET", "/api/overview", nil)
		expect(t, ov, http.StatusOK, "overview")
		m := ov.object(t)
		if m["node"] != n.Name() || m["cluster_name"] == "" || m["rabbitmq_version"] == nil {
			t.Fatalf("overview of %s: %s", n.Name(), ov.body)
		}
		if _, ok := m["object_totals"].(map[string]any)["queues"]; !ok {
			t.Fatalf("overview without object_totals.queues: %s", ov.body)
		}
		if _, ok := m["queue_totals"].(map[string]any)["messages"]; !ok {
			t.Fatalf("overview without queue_totals.messages: %s", ov.body)
		}
		ns := n.guest(t, "GET", "/api/nodes", nil)
		expect(t, ns, http.StatusOK, "nodes")
		list := ns.list(t)
		var names []string
		for _, it := range list {
			names = append(names, it["name"].(string))
			if it["running"] != true || it["mem_used"] == nil {
				t.Fatalf("node %v not running or without figures: %s", it["name"], ns.body)
			}
		}
		want := []string{nodes[0].Name(), nodes[1].Name(), nodes[2].Name()}
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Fatalf("nodes from %s: %v, want %v", n.Name(), names, want)
		}
	}
	one := nodes[1].guest(t, "GET", "/api/nodes/"+nodes[2].Name(), nil)
	expect(t, one, http.StatusOK, "one node")
	if one.object(t)["name"] != nodes[2].Name() {
		t.Fatalf("node: %s", one.body)
	}
	expectError(t, nodes[0].guest(t, "GET", "/api/nodes/nobody", nil), http.StatusNotFound, "Object Not Found", "missing node")
}

func toStrings(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		out = append(out, e.(string))
	}
	return out
}

// field is each item's field as a string.
func field(items []map[string]any, name string) []string {
	var out []string
	for _, it := range items {
		s, _ := it[name].(string)
		out = append(out, s)
	}
	return out
}
