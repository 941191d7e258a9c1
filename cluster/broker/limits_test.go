package broker

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/warrenmq/warren/amqp/wire"
)

func TestParseVhostLimits(t *testing.T) {
	for _, c := range []struct {
		def  string
		want map[string]int64
		err  string
	}{
		{def: `{"max-connections": 10, "max-queues": 0}`, want: map[string]int64{"max-connections": 10, "max-queues": 0}},
		{def: `{"max-queues": -1}`, want: map[string]int64{}},
		{def: `{}`, want: map[string]int64{}},
		{def: `{"max-queues": 1, "max-channels": 2}`, err: "Unrecognised terms [max-channels] in limits"},
		{def: `{"max-queues": "ten"}`, err: "max-queues should be a number, actually was ten"},
		{def: `{"max-queues": 1.5}`, err: "max-queues should be a number, actually was 1.5"},
		{def: `[1]`, err: "could not parse JSON document"},
	} {
		got, err := ParseVhostLimits(c.def)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrInvalidAccess) {
				t.Errorf("%s: %v, want %q", c.def, err, c.err)
			}
			continue
		}
		if err != nil || !maps.Equal(got, c.want) {
			t.Errorf("%s: %v %v, want %v", c.def, got, err, c.want)
		}
	}
}

// TestVhostQueueLimit: a vhost's max-queues refuses one queue more with
// RabbitMQ's 406, redeclaring an existing one still works, and clearing
// the limit lifts it; the limits go out in the definitions and come back.
func TestVhostQueueLimit(t *testing.T) {
	b := newTestBroker(t)
	v := b.vhost("/")
	declare := func(name string) error {
		_, _, err := v.DeclareQueue(nil, 0, QueueDeclare{Name: name, Durable: true})
		return err
	}
	if err := b.SetVhostLimits("/", map[string]int64{LimitMaxQueues: 2}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "a"} {
		if err := declare(name); err != nil {
			t.Fatalf("declare %s: %v", name, err)
		}
	}
	var ae *wire.Error
	if err := declare("c"); !errors.As(err, &ae) || ae.Code != wire.PreconditionFailed ||
		ae.Text != "PRECONDITION_FAILED - cannot declare queue 'c': queue limit in vhost '/' (2) is reached" {
		t.Fatalf("third queue: %v", err)
	}

	other := exportedTo(t, b)
	if got := other.VhostLimits("/"); !maps.Equal(got, map[string]int64{LimitMaxQueues: 2}) {
		t.Fatalf("imported limits %v", got)
	}

	if err := b.SetVhostLimits("/", nil); err != nil {
		t.Fatal(err)
	}
	if err := declare("c"); err != nil {
		t.Fatalf("after clearing: %v", err)
	}
	if err := b.SetVhostLimits("nowhere", map[string]int64{LimitMaxQueues: 1}); !errors.Is(err, ErrNoVhost) {
		t.Fatalf("limits of a missing vhost: %v", err)
	}
}

// TestImportRabbitMQVhostLimits: a real RabbitMQ 3.10.8's export
// (rabbitmqctl set_vhost_limits on tenant and /, then export_definitions)
// writes the limits as [name, value] pairs in each vhost and as
// vhost-limits parameters; both read the same.
func TestImportRabbitMQVhostLimits(t *testing.T) {
	d := readDefinitions(t, "testdata/rabbitmq-3.10.8-limits.json")
	for _, only := range []string{"vhosts", "parameters"} {
		b := newTestBroker(t)
		doc := *d
		if only == "vhosts" {
			doc.Parameters = nil
		} else {
			for i := range doc.Vhosts {
				doc.Vhosts[i].Limits = nil
			}
		}
		if r := b.ImportDefinitions(&doc); len(r.Problems) != 0 {
			t.Fatalf("from %s: %q", only, r.Problems)
		}
		if got := b.VhostLimits("tenant"); !maps.Equal(got, map[string]int64{LimitMaxConnections: 100, LimitMaxQueues: 50}) {
			t.Errorf("from %s: tenant's limits %v", only, got)
		}
		if got := b.VhostLimits("/"); !maps.Equal(got, map[string]int64{LimitMaxQueues: 1000}) {
			t.Errorf("from %s: /'s limits %v", only, got)
		}
	}
}

// TestUserLimits: set, read, clear one, clear all, and the definitions
// round trip of a user's limits.
func TestUserLimits(t *testing.T) {
	b := newTestBroker(t)
	if _, err := ParseUserLimits(`{"max-queues": 1}`); err == nil || !strings.Contains(err.Error(), "Unrecognised terms [max-queues] in limits") {
		t.Fatalf("a vhost limit for a user: %v", err)
	}
	limits, err := ParseUserLimits(`{"max-connections": 3, "max-channels": 0}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetUserLimits("guest", limits); err != nil {
		t.Fatal(err)
	}
	if n, ok := b.UserLimit("guest", LimitMaxChannels); !ok || n != 0 {
		t.Fatalf("max-channels %d %v", n, ok)
	}
	other := exportedTo(t, b)
	if n, ok := other.UserLimit("guest", LimitMaxConnections); !ok || n != 3 {
		t.Fatalf("imported max-connections %d %v", n, ok)
	}
	if err := b.ClearUserLimit("guest", LimitMaxChannels); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.UserLimit("guest", LimitMaxChannels); ok {
		t.Fatal("max-channels still set")
	}
	if n, ok := b.UserLimit("guest", LimitMaxConnections); !ok || n != 3 {
		t.Fatalf("max-connections after clearing max-channels: %d %v", n, ok)
	}
	if err := b.ClearUserLimit("guest", "all"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.UserLimit("guest", LimitMaxConnections); ok {
		t.Fatal("max-connections still set after all")
	}
	if err := b.ClearUserLimit("guest", "max-queues"); !errors.Is(err, ErrInvalidAccess) {
		t.Fatalf("clearing an unknown limit: %v", err)
	}
	if err := b.SetUserLimits("nobody", limits); !errors.Is(err, ErrNoUser) {
		t.Fatalf("limits of a missing user: %v", err)
	}
}

// exportedTo exports b's definitions and imports them into a new broker,
// which it returns.
func exportedTo(t *testing.T, b *Broker) *Broker {
	t.Helper()
	d, err := b.ExportDefinitions("Warren", "test")
	if err != nil {
		t.Fatal(err)
	}
	other := newTestBroker(t)
	if r := other.ImportDefinitions(d); len(r.Problems) != 0 {
		t.Fatalf("import: %q", r.Problems)
	}
	return other
}
