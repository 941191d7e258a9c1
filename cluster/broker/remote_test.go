package broker

import (
	"slices"
	"testing"

	"github.com/warrenmq/warren/cluster/catalog"
)

// transientSnapshot is a cluster's metadata with node n1's transient
// queue t (bound to an auto-delete exchange it alone is bound to, and to
// a durable one), a durable queue d bound to the durable exchange, n1's
// durable auto-delete queue a, and n2's transient queue u.
func transientSnapshot() *catalog.Snapshot {
	return &catalog.Snapshot{
		Exchanges: []catalog.Exchange{
			{Vhost: "/", Name: "ad", Type: "fanout", AutoDelete: true},
			{Vhost: "/", Name: "events", Type: "topic", Durable: true},
		},
		Queues: []catalog.Queue{
			{Vhost: "/", Name: "t", Type: QueueTypeClassic, ID: "i1", Members: []string{"n1"}, Boot: "b1", Exclusive: true},
			{Vhost: "/", Name: "d", Type: QueueTypeQuorum, Durable: true, ID: "i2", Members: []string{"n1", "n2", "n3"}},
			{Vhost: "/", Name: "a", Type: QueueTypeClassic, Durable: true, AutoDelete: true, ID: "i3", Members: []string{"n1"}, Boot: "b1"},
			{Vhost: "/", Name: "u", Type: QueueTypeClassic, ID: "i4", Members: []string{"n2"}, Boot: "b2"},
		},
		Bindings: []catalog.Binding{
			{Vhost: "/", Source: "ad", Destination: "t", Kind: catalog.ToQueue},
			{Vhost: "/", Source: "events", Destination: "t", Kind: catalog.ToQueue, RoutingKey: "#"},
			{Vhost: "/", Source: "events", Destination: "d", Kind: catalog.ToQueue, RoutingKey: "#"},
			{Vhost: "/", Source: "events", Destination: "u", Kind: catalog.ToQueue, RoutingKey: "#"},
		},
	}
}

// TestTransientRemovals: removing a node start's transient queues takes
// their bindings and the auto-delete exchanges left without any, and
// nothing else: not its durable queues, not other nodes' queues.
func TestTransientRemovals(t *testing.T) {
	snap := transientSnapshot()
	changes, n := transientRemovals(snap, func(q catalog.Queue) bool { return slices.Contains(q.Members, "n1") && q.Boot == "b1" })
	if n != 1 {
		t.Fatalf("%d queues removed, want 1 (t)", n)
	}
	var got []string
	for _, c := range changes {
		if !c.Delete {
			t.Fatalf("a removal puts: %+v", c)
		}
		switch {
		case c.Queue != nil:
			got = append(got, "queue "+c.Queue.Name+" "+c.Queue.ID)
		case c.Binding != nil:
			got = append(got, "binding "+c.Binding.Source+">"+c.Binding.Destination)
		case c.Exchange != nil:
			got = append(got, "exchange "+c.Exchange.Name)
		}
	}
	want := []string{"binding ad>t", "binding events>t", "exchange ad", "queue t i1"}
	if !slices.Equal(got, want) {
		t.Fatalf("removals %q, want %q", got, want)
	}
	if _, n := transientRemovals(snap, func(q catalog.Queue) bool { return q.Boot == "b9" }); n != 0 {
		t.Fatalf("%d removed for a start that declared none", n)
	}
}

// TestDefinitionsLeaveExclusiveOut: an export holds what an import can
// declare again, as RabbitMQ 4.3's does: transient exchanges and queues
// (durable false), not exclusive queues nor their bindings.
func TestDefinitionsLeaveExclusiveOut(t *testing.T) {
	d := restorable(transientSnapshot())
	var names []string
	for _, x := range d.Exchanges {
		names = append(names, "exchange "+x.Name)
	}
	for _, q := range d.Queues {
		names = append(names, "queue "+q.Name)
	}
	for _, b := range d.Bindings {
		names = append(names, "binding "+b.Source+">"+b.Destination)
	}
	want := []string{"exchange ad", "exchange events", "queue d", "queue a", "queue u", "binding events>d", "binding events>u"}
	if !slices.Equal(names, want) {
		t.Fatalf("exported %q, want %q", names, want)
	}
}
