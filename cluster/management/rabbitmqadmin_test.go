package management_test

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rabbitmqadmin is RabbitMQ's own command-line client of the API, from
// Debian's rabbitmq-server package.
const rabbitmqadmin = "/usr/bin/rabbitmqadmin"

// testRabbitmqadmin runs RabbitMQ's rabbitmqadmin, unchanged, against
// the cluster: listings, declarations, publish and get, export and
// import.
func testRabbitmqadmin(t *testing.T, n []*apiNode) {
	if _, err := os.Stat(rabbitmqadmin); err != nil {
		if os.Getenv("WARREN_CLIENT_TESTS") == "require" {
			t.Fatalf("%s is missing (apt-get install rabbitmq-server)", rabbitmqadmin)
		}
		t.Skipf("%s is not installed (Debian's rabbitmq-server package has it)", rabbitmqadmin)
	}
	admin := func(node *apiNode, args ...string) string {
		t.Helper()
		u, err := url.Parse(node.url)
		if err != nil {
			t.Fatal(err)
		}
		base := []string{"-H", u.Hostname(), "-P", u.Port(), "-u", "guest", "-p", "guest"}
		out, err := exec.Command(rabbitmqadmin, append(base, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("rabbitmqadmin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	mustShow := func(out, want, what string) {
		t.Helper()
		if !strings.Contains(out, want) {
			t.Fatalf("%s: %q not in\n%s", what, want, out)
		}
	}

	out := admin(n[0], "list", "nodes")
	for _, node := range n {
		mustShow(out, node.Name(), "list nodes")
	}
	mustShow(admin(n[1], "list", "users"), "guest", "list users")
	mustShow(admin(n[1], "list", "exchanges"), "amq.topic", "list exchanges")
	mustShow(admin(n[1], "list", "vhosts"), "/", "list vhosts")
	mustShow(admin(n[1], "show", "overview"), "object_totals.queues", "show overview")
	mustShow(admin(n[1], "list", "permissions"), "guest", "list permissions")
	for _, what := range []string{"channels", "consumers", "policies", "operator_policies", "vhost_limits"} {
		admin(n[2], "list", what) // each answered, even when empty
	}

	admin(n[0], "declare", "queue", "name=ra-orders", "queue_type=quorum", "durable=true")
	admin(n[0], "declare", "exchange", "name=ra-events", "type=direct")
	admin(n[0], "declare", "binding", "source=ra-events", "destination=ra-orders", "routing_key=created")
	seen(t, n[1], "/api/bindings/%2F/e/ra-events/q/ra-orders/created")
	seen(t, n[2], "/api/bindings/%2F/e/ra-events/q/ra-orders/created")
	mustShow(admin(n[2], "list", "queues", "name", "type"), "quorum", "list queues")
	mustShow(admin(n[2], "list", "bindings"), "ra-events", "list bindings")

	admin(n[1], "publish", "exchange=ra-events", "routing_key=created", "payload=hello from rabbitmqadmin")
	mustShow(admin(n[2], "get", "queue=ra-orders", "ackmode=ack_requeue_false"), "hello from rabbitmqadmin", "get")

	n[0].Dial() // a client for rabbitmqadmin to list
	eventually(t, "the client's connection listed", func() bool {
		out, _ := exec.Command(rabbitmqadmin, "-H", "127.0.0.1", "-P", portOf(t, n[2].url), "-u", "guest", "-p", "guest", "list", "connections").CombinedOutput()
		return strings.Contains(string(out), "guest")
	})

	file := filepath.Join(t.TempDir(), "definitions.json")
	admin(n[0], "export", file)
	admin(n[0], "delete", "binding", "source=ra-events", "destination_type=queue", "destination=ra-orders", "properties_key=created")
	admin(n[0], "delete", "queue", "name=ra-orders")
	admin(n[0], "delete", "exchange", "name=ra-events")
	seen404(t, n[1], "/api/queues/%2F/ra-orders")
	admin(n[1], "import", file)
	seen(t, n[2], "/api/queues/%2F/ra-orders")
	seen(t, n[2], "/api/bindings/%2F/e/ra-events/q/ra-orders/created")
	// One vhost's definitions (--vhost), into another vhost.
	vfile := filepath.Join(t.TempDir(), "vhost.json")
	admin(n[2], "--vhost=/", "export", vfile)
	admin(n[2], "declare", "vhost", "name=ra-copy")
	seen(t, n[0], "/api/vhosts/ra-copy")
	admin(n[0], "--vhost=ra-copy", "import", vfile)
	seen(t, n[1], "/api/queues/ra-copy/ra-orders")
	seen(t, n[1], "/api/bindings/ra-copy/e/ra-events/q/ra-orders/created")
	admin(n[1], "delete", "vhost", "name=ra-copy")

	admin(n[2], "delete", "queue", "name=ra-orders")
	admin(n[2], "delete", "exchange", "name=ra-events")
}

func portOf(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}
