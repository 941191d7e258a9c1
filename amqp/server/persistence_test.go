package server_test

import (
	"errors"
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/broker"
)

func TestDefinitionsSurviveRestart(t *testing.T) {
	n := startNode(t, withSeed(limitedSeed()))
	c := n.dial(t)
	ch := openChannel(t, c)
	ttl := amqp091.Table{"x-message-ttl": int32(60000)}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	declare := func(name string, durable, autoDelete, exclusive bool, args amqp091.Table) {
		t.Helper()
		_, err := ch.QueueDeclare(name, durable, autoDelete, exclusive, false, args)
		must(err)
	}

	// Durable: kept.
	must(ch.ExchangeDeclare("dur.x", "direct", true, false, false, false, nil))
	must(ch.ExchangeDeclare("dur.internal", "topic", true, false, true, false, nil))
	must(ch.ExchangeDeclare("dur.ad", "fanout", true, true, false, false, nil))
	declare("dur.q", true, false, false, ttl) // quorum, by default
	declare("dur.cq", true, false, false, classicArgs)
	declare("dur.adq", true, true, false, nil)
	must(ch.QueueBind("dur.q", "k", "dur.x", false, nil))
	must(ch.QueueBind("dur.q", "k", "dur.x", false, amqp091.Table{"a": "b"}))
	must(ch.QueueBind("dur.cq", "k2", "dur.x", false, nil))
	must(ch.QueueBind("dur.q", "t.#", "amq.topic", false, nil))
	must(ch.QueueBind("dur.cq", "", "dur.ad", false, nil))

	// Transient, exclusive, or deleted before the restart: gone.
	must(ch.ExchangeDeclare("tmp.x", "fanout", false, false, false, false, nil))
	declare("tmp.q", false, false, false, nil)
	declare("excl.q", true, false, true, nil)
	must(ch.QueueBind("tmp.q", "k", "dur.x", false, nil))  // to a transient queue
	must(ch.QueueBind("dur.q", "", "tmp.x", false, nil))   // from a transient exchange
	must(ch.QueueBind("excl.q", "k", "dur.x", false, nil)) // to an exclusive queue
	must(ch.ExchangeDeclare("dur.deleted", "direct", true, false, false, false, nil))
	declare("dur.deleted", true, false, false, nil)
	must(ch.QueueBind("dur.deleted", "k", "dur.x", false, nil))
	must(ch.QueueBind("dur.cq", "gone", "dur.x", false, nil))
	must(ch.QueueUnbind("dur.cq", "gone", "dur.x", nil))
	_, err := ch.QueueDelete("dur.deleted", false, false, false)
	must(err)
	must(ch.ExchangeDelete("dur.deleted", false, false))

	// The restart must not simply re-seed: start with no seed at all.
	n.cfg.Broker.Seed = broker.Seed{}
	n.restart()

	c = n.dial(t)
	ch = openChannel(t, c)
	for _, q := range []string{"dur.q", "dur.cq", "dur.adq"} {
		if !queueExists(t, c, q) {
			t.Errorf("durable queue %s lost", q)
		}
	}
	for _, x := range []string{"dur.x", "dur.internal", "dur.ad"} {
		if !exchangeExists(t, c, x) {
			t.Errorf("durable exchange %s lost", x)
		}
	}
	for _, q := range []string{"tmp.q", "excl.q", "dur.deleted"} {
		if queueExists(t, c, q) {
			t.Errorf("queue %s survived the restart", q)
		}
	}
	for _, x := range []string{"tmp.x", "dur.deleted"} {
		if exchangeExists(t, c, x) {
			t.Errorf("exchange %s survived the restart", x)
		}
	}

	// Properties and arguments survived.
	_, err = openChannel(t, c).QueueDeclare("dur.q", true, false, false, false, classicArgs)
	wantError(t, err, amqp091.PreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'dur.q' in vhost '/': received 'classic' but current is 'quorum'")
	_, err = openChannel(t, c).QueueDeclare("dur.q", true, false, false, false, amqp091.Table{"x-message-ttl": int64(1)})
	wantError(t, err, amqp091.PreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'dur.q' in vhost '/': received '1' but current is '60000'")
	if _, err := ch.QueueDeclare("dur.q", true, false, false, false, amqp091.Table{"x-message-ttl": int64(60000)}); err != nil {
		t.Fatalf("equivalent redeclare after restart: %v", err)
	}
	if _, err := ch.QueueDeclare("dur.cq", true, false, false, false, classicArgs); err != nil {
		t.Fatalf("redeclare classic queue after restart: %v", err)
	}
	if _, err := ch.QueueDeclare("dur.adq", true, true, false, false, nil); err != nil {
		t.Fatalf("redeclare auto-delete queue after restart: %v", err)
	}
	err = openChannel(t, c).ExchangeDeclare("dur.x", "fanout", true, false, false, false, nil)
	wantError(t, err, amqp091.PreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'dur.x' in vhost '/': received 'fanout' but current is 'direct'")
	if err := ch.ExchangeDeclare("dur.ad", "fanout", true, true, false, false, nil); err != nil {
		t.Fatalf("redeclare auto-delete exchange after restart: %v", err)
	}
	pub := openChannel(t, c)
	closed := notifyClose(pub)
	publishBody(t, pub, "dur.internal", "", "x")
	waitClose(t, closed, amqp091.AccessRefused, "ACCESS_REFUSED - cannot publish to internal exchange 'dur.internal' in vhost '/'")

	// Bindings between durable ends survived, the others did not.
	qs := []string{"dur.cq", "dur.q"}
	checkRoutes(t, ch, "dur.x", qs, map[string][]string{
		"k":    {"dur.q"},
		"k2":   {"dur.cq"},
		"gone": nil,
	})
	checkRoutes(t, ch, "amq.topic", qs, map[string][]string{"t.a": {"dur.q"}})
	checkRoutes(t, ch, "dur.ad", qs, map[string][]string{"": {"dur.cq"}})
	// Both dur.x→dur.q bindings (with and without arguments) came back:
	// removing one leaves the route.
	if err := ch.QueueUnbind("dur.q", "k", "dur.x", nil); err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, ch, "dur.x", qs, map[string][]string{"k": {"dur.q"}})
	// The restored auto-delete exchange still deletes itself.
	if err := ch.QueueUnbind("dur.cq", "", "dur.ad", nil); err != nil {
		t.Fatal(err)
	}
	if exchangeExists(t, c, "dur.ad") {
		t.Error("restored auto-delete exchange survived losing its last binding")
	}

	// Users, vhosts and permissions survived.
	if _, err := amqp091.Dial(n.url("limited", "wrong", "/")); !errors.Is(err, amqp091.ErrCredentials) {
		t.Fatalf("wrong password after restart: %v", err)
	}
	lc := n.dialAs(t, "limited", "secret", "/")
	lch := openChannel(t, lc)
	declareQueue(t, lch, "lim.after")
	_, err = openChannel(t, lc).QueueDeclare("other.after", false, false, false, false, nil)
	wantError(t, err, amqp091.AccessRefused,
		"ACCESS_REFUSED - configure access to queue 'other.after' in vhost '/' refused for user 'limited'")
	n.dialAs(t, "hashed", "s3cret", "other")
	_, err = amqp091.Dial(n.url("guest", "guest", "other"))
	wantError(t, err, amqp091.NotAllowed, "NOT_ALLOWED - access to vhost 'other' refused for user 'guest'")
	_, err = amqp091.Dial(n.url("guest", "guest", "never"))
	wantCode(t, err, amqp091.NotAllowed)

	// Now declare the lost transient and exclusive queues again, durable:
	// no stale record of their old bindings may bring those back.
	declare("tmp.q", true, false, false, classicArgs)
	declare("excl.q", true, false, false, classicArgs)

	// A second restart keeps what the first one restored.
	n.restart()
	c = n.dial(t)
	ch = openChannel(t, c)
	if !slices.Equal([]bool{queueExists(t, c, "dur.q"), exchangeExists(t, c, "dur.x"), exchangeExists(t, c, "dur.ad")}, []bool{true, true, false}) {
		t.Fatal("second restart changed the definitions")
	}
	checkRoutes(t, ch, "dur.x", []string{"dur.cq", "dur.q", "excl.q", "tmp.q"}, map[string][]string{
		"k":  {"dur.q"},
		"k2": {"dur.cq"},
	})
}
