package broker

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/warrenmq/warren/cluster/catalog"
)

// rabbitmqDefinitions is a document exported by a real RabbitMQ 3.10.8
// (rabbitmqctl export_definitions) after: add_vhost orders; add_user
// alice s3cret; set_user_tags alice monitoring management; permissions for
// alice and guest; a policy and an operator policy; a topic permission;
// and, through an AMQP client, four exchanges (one with an alternate
// exchange), two quorum queues (one dead-lettering), a classic queue and
// four bindings (one exchange to exchange).
const rabbitmqDefinitions = "testdata/rabbitmq-3.10.8-definitions.json"

func readDefinitions(t *testing.T, path string) *Definitions {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d Definitions
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func TestImportRabbitMQDefinitions(t *testing.T) {
	b := newTestBroker(t)
	r := b.ImportDefinitions(readDefinitions(t, rabbitmqDefinitions))
	want := map[string]int{"users": 2, "vhosts": 2, "permissions": 3, "policies": 1, "operator policies": 1, "exchanges": 4, "queues": 3, "bindings": 4}
	for k, n := range want {
		if r.Imported[k] != n {
			t.Errorf("imported %d %s, want %d (all: %v)", r.Imported[k], k, n, r.Imported)
		}
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "topic permission") {
		t.Errorf("problems %q, want only the topic permission", r.Problems)
	}
	// RabbitMQ's password hash logs alice in with her password.
	u, err := b.Authenticate("PLAIN", "alice", "s3cret", nil)
	if err != nil || !slices.Equal(u.Tags, []string{"monitoring", "management"}) {
		t.Fatalf("alice: %+v, %v", u, err)
	}
	if len(b.Permissions("orders", "alice")) != 1 {
		t.Fatal("alice's permission in orders missing")
	}
	ops := b.Policies("orders", true)
	if len(ops) != 1 || ops[0].Name != "cap" || ops[0].Definition["max-length-bytes"] != int64(100000000) {
		t.Fatalf("operator policies %+v", ops)
	}
	pols := b.Policies("orders", false)
	if len(pols) != 1 || pols[0].Definition["delivery-limit"] != int64(5) || pols[0].Priority != 2 {
		t.Fatalf("policies %+v", pols)
	}
	types := map[string]string{}
	for _, q := range b.Queues("orders") {
		types[q.Record.Name] = q.Record.Type
	}
	if types["orders.created"] != QueueTypeQuorum || types["orders.dead"] != QueueTypeQuorum || types["orders.audit"] != QueueTypeClassic {
		t.Fatalf("queue types %v", types)
	}
	// Routing as imported: the topic binding; the direct exchange whose
	// one binding (to orders.events) does not match sends the message to
	// its alternate exchange, which leads to the classic queue.
	for _, c := range []struct{ exchange, key, queue string }{
		{"orders.events", "order.created.eu", "orders.created"},
		{"orders.in", "order.created.eu", "orders.audit"},
	} {
		qs, err := b.vhost("orders").Route(c.exchange, []string{c.key}, nil, nil)
		if err != nil || len(qs) != 1 || qs[0].rec.Name != c.queue {
			t.Fatalf("route %s %s: %v, %v; want %s", c.exchange, c.key, qs, err, c.queue)
		}
	}

	// Importing again changes nothing and refuses nothing new.
	if r := b.ImportDefinitions(readDefinitions(t, rabbitmqDefinitions)); len(r.Problems) != 1 {
		t.Fatalf("a second import: %q", r.Problems)
	}

	// Warren's export carries the same into another broker.
	d, err := b.ExportDefinitions("Warren", "test")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var again Definitions
	if err := json.Unmarshal(doc, &again); err != nil {
		t.Fatal(err)
	}
	other := newTestBroker(t)
	if r := other.ImportDefinitions(&again); len(r.Problems) != 0 {
		t.Fatalf("importing Warren's export: %q", r.Problems)
	}
	d2, err := other.ExportDefinitions("Warren", "test")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := canonical(t, d), canonical(t, d2); a != b {
		t.Fatalf("exports differ after a round trip:\n%s\n%s", a, b)
	}
	if _, err := other.Authenticate("PLAIN", "alice", "s3cret", nil); err != nil {
		t.Fatalf("alice after the round trip: %v", err)
	}
}

func TestImportRefusesWhatItCannotTake(t *testing.T) {
	b := newTestBroker(t)
	d := &Definitions{
		Users:      []DefUser{{Name: "old", PasswordHash: "x", HashingAlgorithm: "rabbit_password_hashing_md5"}},
		Queues:     []DefQueue{{Name: "s", Vhost: "/", Durable: true, Arguments: json.RawMessage(`{"x-queue-type":"stream"}`)}, {Name: "q", Vhost: "nowhere", Durable: true}},
		Parameters: []DefParameter{{Vhost: "/", Component: "federation-upstream", Name: "up", Value: json.RawMessage(`{}`)}},
	}
	r := b.ImportDefinitions(d)
	if len(r.Problems) != 4 {
		t.Fatalf("problems %q", r.Problems)
	}
	for i, want := range []string{"password hashing rabbit_password_hashing_md5", "federation-upstream", "queue s in vhost /", "no_such_vhost: nowhere"} {
		if !strings.Contains(r.Problems[i], want) {
			t.Errorf("problem %d %q lacks %q", i, r.Problems[i], want)
		}
	}
	if slices.ContainsFunc(b.Users(), func(u catalog.User) bool { return u.Name == "old" }) {
		t.Fatal("a user with an unknown hashing was imported")
	}
}

// canonical is a document without its sort order (the store lists
// records by key), so that two exports compare by content.
func canonical(t *testing.T, d *Definitions) string {
	t.Helper()
	c := *d
	c.Bindings = slices.Clone(d.Bindings)
	slices.SortFunc(c.Bindings, func(a, b DefBinding) int {
		return strings.Compare(a.Vhost+"\x00"+a.Source+"\x00"+a.Destination+"\x00"+a.RoutingKey, b.Vhost+"\x00"+b.Source+"\x00"+b.Destination+"\x00"+b.RoutingKey)
	})
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
