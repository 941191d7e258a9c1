package catalog

import (
	"reflect"
	"testing"
)

func TestBoltStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := &Snapshot{
		Vhosts:      []Vhost{{Name: "/", DefaultQueueType: "quorum"}},
		Users:       []User{{Name: "guest", PasswordHash: "abc", Tags: []string{"administrator"}}},
		Permissions: []Permission{{User: "guest", Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"}},
		Exchanges:   []Exchange{{Vhost: "/", Name: "x", Type: "topic", Durable: true, Arguments: []byte{0, 0, 0, 0}}},
		Bindings: []Binding{
			{Vhost: "/", Source: "x", Destination: "q", RoutingKey: "a.#"},
			{Vhost: "/", Source: "x", Destination: "q", RoutingKey: "b.*"},
		},
		Queues: []Queue{{Vhost: "/", Name: "q", Type: "quorum", Durable: true}},
		// In key order: operator policies ("operator_policy") first.
		Policies: []Policy{
			{Vhost: "/", Name: "p", Operator: true, Pattern: ".*", ApplyTo: "all", Priority: -2},
			{Vhost: "/", Name: "p", Pattern: "^q", ApplyTo: "queues", Definition: []byte{0, 0, 0, 1}, Priority: 1},
		},
	}
	var changes []Change
	for _, r := range want.Vhosts {
		changes = append(changes, Put(r))
	}
	changes = append(changes, Put(want.Users[0]), Put(want.Permissions[0]), Put(want.Exchanges[0]),
		Put(want.Bindings[0]), Put(want.Bindings[1]), Put(want.Queues[0]),
		Put(want.Policies[0]), Put(want.Policies[1]), Put(Policy{Vhost: "/", Name: "gone"}), Del(Policy{Vhost: "/", Name: "gone"}))
	changes = append(changes, Put(Queue{Vhost: "/", Name: "gone", Durable: true}), Del(Queue{Vhost: "/", Name: "gone"}))
	if err := s.Apply(changes...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reloaded snapshot differs:\n got %+v\nwant %+v", got, want)
	}
}
