package server_test

import (
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// bindQueues declares one transient queue per name and binds it to
// exchange with each of its keys.
func bindQueues(t *testing.T, ch *amqp091.Channel, exchange string, bindings map[string][]string) {
	t.Helper()
	for q, keys := range bindings {
		declareQueue(t, ch, q)
		for _, k := range keys {
			if err := ch.QueueBind(q, k, exchange, false, nil); err != nil {
				t.Fatalf("bind %s to %s with %q: %v", q, exchange, k, err)
			}
		}
	}
}

// routedTo publishes one message with key to exchange and returns the
// queues (of those named) it reached, taking it from them.
func routedTo(t *testing.T, ch *amqp091.Channel, exchange, key string, queues ...string) []string {
	t.Helper()
	publishBody(t, ch, exchange, key, key)
	var got []string
	for _, q := range queues {
		bodies := drainQueue(t, ch, q)
		switch len(bodies) {
		case 0:
		case 1:
			if bodies[0] != key {
				t.Fatalf("queue %s holds %q, want %q", q, bodies[0], key)
			}
			got = append(got, q)
		default:
			t.Fatalf("queue %s got %d copies of %q, want at most 1", q, len(bodies), key)
		}
	}
	return got
}

func checkRoutes(t *testing.T, ch *amqp091.Channel, exchange string, queues []string, want map[string][]string) {
	t.Helper()
	for key, wantQs := range want {
		got := routedTo(t, ch, exchange, key, queues...)
		if !slices.Equal(got, wantQs) {
			t.Errorf("%s: key %q reached %v, want %v", exchange, key, got, wantQs)
		}
	}
}

func TestDirectExchangeRouting(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	if err := ch.ExchangeDeclare("logs.direct", "direct", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	bindQueues(t, ch, "logs.direct", map[string][]string{
		"d.errors": {"error"},
		"d.all":    {"error", "info"},
	})
	checkRoutes(t, ch, "logs.direct", []string{"d.all", "d.errors"}, map[string][]string{
		"error":   {"d.all", "d.errors"},
		"info":    {"d.all"},
		"warning": nil,
		"":        nil,
	})
}

func TestFanoutExchangeRouting(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	if err := ch.ExchangeDeclare("fan", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	bindQueues(t, ch, "fan", map[string][]string{
		"f.a": {"ignored"},
		"f.b": {""},
	})
	checkRoutes(t, ch, "fan", []string{"f.a", "f.b"}, map[string][]string{
		"anything": {"f.a", "f.b"},
		"":         {"f.a", "f.b"},
	})
}

func TestTopicExchangeRouting(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	if err := ch.ExchangeDeclare("animals", "topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	bindQueues(t, ch, "animals", map[string][]string{
		"t.orange": {"*.orange.*"},
		"t.lazy":   {"*.*.rabbit", "lazy.#"},
		"t.all":    {"#"},
		"t.mid":    {"a.#.z"},
	})
	qs := []string{"t.all", "t.lazy", "t.mid", "t.orange"}
	checkRoutes(t, ch, "animals", qs, map[string][]string{
		"quick.orange.rabbit":      {"t.all", "t.lazy", "t.orange"},
		"lazy.orange.elephant":     {"t.all", "t.lazy", "t.orange"},
		"quick.orange.fox":         {"t.all", "t.orange"},
		"lazy.brown.fox":           {"t.all", "t.lazy"},
		"lazy.pink.rabbit":         {"t.all", "t.lazy"}, // two bindings, one copy
		"quick.brown.fox":          {"t.all"},
		"orange":                   {"t.all"},
		"quick.orange.male.rabbit": {"t.all"},
		"lazy.orange.male.rabbit":  {"t.all", "t.lazy"},
		"lazy":                     {"t.all", "t.lazy"}, // '#' matches zero words
		"":                         {"t.all"},
		"a.z":                      {"t.all", "t.mid"},
		"a.b.c.z":                  {"t.all", "t.mid"},
		"a.b.c":                    {"t.all"},
	})
}

func TestDefaultExchange(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "plain")
	checkRoutes(t, ch, "", []string{"plain"}, map[string][]string{
		"plain":   {"plain"},
		"missing": nil,
	})

	// Binding to it, declaring or deleting it are refused.
	for name, op := range map[string]func(*amqp091.Channel) error{
		"bind": func(ch *amqp091.Channel) error { return ch.QueueBind("plain", "k", "", false, nil) },
		"declare": func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("", "direct", true, false, false, false, nil)
		},
		"delete": func(ch *amqp091.Channel) error { return ch.ExchangeDelete("", false, false) },
	} {
		t.Run(name, func(t *testing.T) {
			err := op(openChannel(t, c))
			wantError(t, err, amqp091.AccessRefused, "ACCESS_REFUSED - operation not permitted on the default exchange")
		})
	}
}

func TestPredeclaredExchanges(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	for _, x := range []struct{ name, kind string }{
		{"amq.direct", "direct"}, {"amq.fanout", "fanout"}, {"amq.topic", "topic"},
	} {
		if err := ch.ExchangeDeclarePassive(x.name, x.kind, true, false, false, false, nil); err != nil {
			t.Fatalf("passive declare %s: %v", x.name, err)
		}
		// An equivalent redeclaration is fine; the amq. prefix is only
		// refused for new exchanges.
		if err := ch.ExchangeDeclare(x.name, x.kind, true, false, false, false, nil); err != nil {
			t.Fatalf("redeclare %s: %v", x.name, err)
		}
	}
	declareQueue(t, ch, "pre")
	for _, b := range []struct{ x, key string }{{"amq.direct", "pre"}, {"amq.fanout", ""}, {"amq.topic", "pre.#"}} {
		if err := ch.QueueBind("pre", b.key, b.x, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	checkRoutes(t, ch, "amq.direct", []string{"pre"}, map[string][]string{"pre": {"pre"}, "other": nil})
	checkRoutes(t, ch, "amq.fanout", []string{"pre"}, map[string][]string{"x": {"pre"}})
	checkRoutes(t, ch, "amq.topic", []string{"pre"}, map[string][]string{"pre.a.b": {"pre"}, "other": nil})

	err := openChannel(t, c).ExchangeDeclare("amq.direct", "fanout", true, false, false, false, nil)
	wantError(t, err, amqp091.PreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'amq.direct' in vhost '/': received 'fanout' but current is 'direct'")
}

func TestExchangeDeclareErrors(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	if err := ch.ExchangeDeclare("eq", "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("eq", "direct", true, false, false, false, nil); err != nil {
		t.Fatalf("equivalent redeclare: %v", err)
	}
	cases := []struct {
		name string
		op   func(*amqp091.Channel) error
		code int
		text string
	}{
		{"type", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("eq", "fanout", true, false, false, false, nil)
		},
			amqp091.PreconditionFailed, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'eq' in vhost '/': received 'fanout' but current is 'direct'"},
		{"durable", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("eq", "direct", false, false, false, false, nil)
		},
			amqp091.PreconditionFailed, "PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'eq' in vhost '/': received 'false' but current is 'true'"},
		{"auto_delete", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("eq", "direct", true, true, false, false, nil)
		},
			amqp091.PreconditionFailed, "PRECONDITION_FAILED - inequivalent arg 'auto_delete' for exchange 'eq' in vhost '/': received 'true' but current is 'false'"},
		{"passive missing", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive("nope", "direct", false, false, false, false, nil)
		},
			amqp091.NotFound, "NOT_FOUND - no exchange 'nope' in vhost '/'"},
		{"reserved name", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("amq.custom", "direct", false, false, false, false, nil)
		},
			amqp091.AccessRefused, "ACCESS_REFUSED - exchange name 'amq.custom' contains reserved prefix 'amq.*'"},
		{"unknown type", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("odd", "bogus", false, false, false, false, nil)
		},
			amqp091.PreconditionFailed, "PRECONDITION_FAILED - unknown exchange type 'bogus'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, tc.op(openChannel(t, c)), tc.code, tc.text)
		})
	}
	// The soft errors closed only their channels.
	if err := ch.ExchangeDeclarePassive("eq", "direct", true, false, false, false, nil); err != nil {
		t.Fatalf("first channel after the others' errors: %v", err)
	}
	if exchangeExists(t, c, "odd") {
		t.Fatal("exchange of unknown type was created")
	}
}

func TestExchangeDelete(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)

	// Deleting a missing exchange succeeds, twice.
	for range 2 {
		if err := ch.ExchangeDelete("never", false, false); err != nil {
			t.Fatalf("delete missing exchange: %v", err)
		}
	}

	if err := ch.ExchangeDeclare("busy", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareQueue(t, ch, "busy.q")
	if err := ch.QueueBind("busy.q", "", "busy", false, nil); err != nil {
		t.Fatal(err)
	}
	err := openChannel(t, c).ExchangeDelete("busy", true, false)
	wantError(t, err, amqp091.PreconditionFailed, "PRECONDITION_FAILED - exchange 'busy' in vhost '/' in use")
	if !exchangeExists(t, c, "busy") {
		t.Fatal("if-unused delete removed an exchange in use")
	}
	if err := ch.QueueUnbind("busy.q", "", "busy", nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDelete("busy", true, false); err != nil {
		t.Fatalf("if-unused delete of an unused exchange: %v", err)
	}
	if exchangeExists(t, c, "busy") {
		t.Fatal("exchange still exists after delete")
	}

	// Deleting an exchange with bindings drops them; the queue stays.
	if err := ch.ExchangeDeclare("gone", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("busy.q", "", "gone", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDelete("gone", false, false); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("gone", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, ch, "gone", []string{"busy.q"}, map[string][]string{"k": nil})

	for _, name := range []string{"amq.direct", "amq.fanout", "amq.topic", "amq.whatever"} {
		err := openChannel(t, c).ExchangeDelete(name, false, false)
		wantError(t, err, amqp091.AccessRefused, "ACCESS_REFUSED - deletion of system exchange '"+name+"' in vhost '/' not allowed")
	}
	if !exchangeExists(t, c, "amq.direct") {
		t.Fatal("amq.direct was deleted")
	}
}

func TestAutoDeleteExchange(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)

	// Removed when its last binding is unbound, not before.
	if err := ch.ExchangeDeclare("ad.unbind", "direct", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if !exchangeExists(t, c, "ad.unbind") {
		t.Fatal("auto-delete exchange removed before it ever had a binding")
	}
	declareQueue(t, ch, "ad.q1")
	declareQueue(t, ch, "ad.q2")
	for _, q := range []string{"ad.q1", "ad.q2"} {
		if err := ch.QueueBind(q, "k", "ad.unbind", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.QueueUnbind("ad.q1", "k", "ad.unbind", nil); err != nil {
		t.Fatal(err)
	}
	if !exchangeExists(t, c, "ad.unbind") {
		t.Fatal("auto-delete exchange removed while it still had a binding")
	}
	if err := ch.QueueUnbind("ad.q2", "k", "ad.unbind", nil); err != nil {
		t.Fatal(err)
	}
	if exchangeExists(t, c, "ad.unbind") {
		t.Fatal("auto-delete exchange survived losing its last binding")
	}

	// Removed when the queue of its last binding is deleted.
	if err := ch.ExchangeDeclare("ad.qdel", "fanout", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("ad.q1", "", "ad.qdel", false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete("ad.q1", false, false, false); err != nil {
		t.Fatal(err)
	}
	if exchangeExists(t, c, "ad.qdel") {
		t.Fatal("auto-delete exchange survived the deletion of its last bound queue")
	}
}

func TestPublishToMissingExchangeClosesChannel(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	closed := notifyClose(ch)
	publishBody(t, ch, "no.such.exchange", "k", "x")
	waitClose(t, closed, amqp091.NotFound, "NOT_FOUND - no exchange 'no.such.exchange' in vhost '/'")

	// The connection is unharmed.
	other := openChannel(t, c)
	declareQueue(t, other, "after")
}

func TestPublishToInternalExchangeRefused(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	if err := ch.ExchangeDeclare("inside", "fanout", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	err := openChannel(t, c).ExchangeDeclare("inside", "fanout", false, false, false, false, nil)
	wantError(t, err, amqp091.PreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'internal' for exchange 'inside' in vhost '/': received 'false' but current is 'true'")
	closed := notifyClose(ch)
	publishBody(t, ch, "inside", "", "x")
	waitClose(t, closed, amqp091.AccessRefused, "ACCESS_REFUSED - cannot publish to internal exchange 'inside' in vhost '/'")
}
