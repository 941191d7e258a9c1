package server_test

import (
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/raftq/testwait"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// routedWithHeaders publishes body with headers to exchange and returns
// the queues (of those named) it reached, taking it from them.
func routedWithHeaders(t *testing.T, ch *amqp091.Channel, exchange, key string, headers amqp091.Table, queues ...string) []string {
	t.Helper()
	publish(t, ch, exchange, key, amqp091.Publishing{Headers: headers, Body: []byte("m")})
	var got []string
	for _, q := range queues {
		switch n := len(drainQueue(t, ch, q)); n {
		case 0:
		case 1:
			got = append(got, q)
		default:
			t.Fatalf("queue %s got %d copies, want at most 1", q, n)
		}
	}
	return got
}

func TestHeadersExchangeRouting(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	must(t, ch.ExchangeDeclare("hdr", "headers", false, false, false, false, nil))
	binds := []struct {
		q    string
		args amqp091.Table
	}{
		{"h.all", amqp091.Table{"format": "pdf", "type": "report"}}, // x-match all by default
		{"h.any", amqp091.Table{"x-match": "any", "format": "pdf", "type": "report"}},
		{"h.allx", amqp091.Table{"x-match": "all-with-x", "format": "pdf", "x-tier": "gold"}},
		{"h.anyx", amqp091.Table{"x-match": "any-with-x", "x-tier": "gold"}},
		{"h.void", amqp091.Table{"x-match": "all", "lang": nil, "x-tier": "ignored"}},
	}
	var queues []string
	for _, b := range binds {
		declareQueue(t, ch, b.q)
		must(t, ch.QueueBind(b.q, "", "hdr", false, b.args))
		queues = append(queues, b.q)
	}
	cases := []struct {
		headers amqp091.Table
		want    []string
	}{
		{amqp091.Table{"format": "pdf", "type": "report"}, []string{"h.all", "h.any"}},
		{amqp091.Table{"format": "pdf", "type": "log"}, []string{"h.any"}},
		{amqp091.Table{"format": "pdf", "x-tier": "gold"}, []string{"h.any", "h.allx", "h.anyx"}},
		{amqp091.Table{"format": "pdf", "x-tier": "silver"}, []string{"h.any"}},
		{amqp091.Table{"lang": "en"}, []string{"h.void"}},
		{amqp091.Table{"lang": int32(7), "type": "report"}, []string{"h.any", "h.void"}},
		{nil, nil},
	}
	for _, c := range cases {
		if got := routedWithHeaders(t, ch, "hdr", "ignored", c.headers, queues...); !slices.Equal(got, c.want) {
			t.Errorf("headers %v reached %v, want %v", c.headers, got, c.want)
		}
	}
	// Numbers match by value whatever their width.
	declareQueue(t, ch, "h.num")
	must(t, ch.QueueBind("h.num", "", "hdr", false, amqp091.Table{"n": int64(5)}))
	if got := routedWithHeaders(t, ch, "hdr", "", amqp091.Table{"n": int16(5)}, "h.num"); len(got) != 1 {
		t.Errorf("short 5 did not match long 5")
	}

	// An invalid x-match is refused.
	bad := openChannel(t, n.dial(t))
	err := bad.QueueBind("h.all", "", "hdr", false, amqp091.Table{"x-match": "some"})
	wantCode(t, err, amqp091.PreconditionFailed)

	// amq.headers and amq.match are predeclared, durable headers exchanges.
	for _, x := range []string{"amq.headers", "amq.match"} {
		must(t, ch.ExchangeDeclarePassive(x, "headers", true, false, false, false, nil))
		must(t, ch.ExchangeDeclare(x, "headers", true, false, false, false, nil))
		q := "q." + x
		declareQueue(t, ch, q)
		must(t, ch.QueueBind(q, "", x, false, amqp091.Table{"k": "v"}))
		if got := routedWithHeaders(t, ch, x, "", amqp091.Table{"k": "v"}, q); len(got) != 1 {
			t.Errorf("%s did not route by headers", x)
		}
	}
}

// expectReturn waits for a basic.return; expectNoReturn checks that
// none comes after a round trip.
func expectReturn(t *testing.T, returns <-chan amqp091.Return, key string) {
	t.Helper()
	select {
	case r := <-returns:
		if r.RoutingKey != key || r.ReplyCode != amqp091.NoRoute {
			t.Fatalf("return %d for %q, want 312 for %q", r.ReplyCode, r.RoutingKey, key)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no basic.return for %q", key)
	}
}

func expectNoReturn(t *testing.T, ch *amqp091.Channel, returns <-chan amqp091.Return) {
	t.Helper()
	barrier(t, ch)
	select {
	case r := <-returns:
		t.Fatalf("unexpected basic.return for %q", r.RoutingKey)
	case <-time.After(100 * time.Millisecond):
	}
}

func publishMandatory(t *testing.T, ch *amqp091.Channel, exchange, key string) {
	t.Helper()
	if err := ch.Publish(exchange, key, true, false, amqp091.Publishing{Body: []byte(key)}); err != nil {
		t.Fatal(err)
	}
}

func TestAlternateExchange(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	returns := ch.NotifyReturn(make(chan amqp091.Return, 4))
	must(t, ch.ExchangeDeclare("ae", "fanout", false, false, false, false, nil))
	declareQueue(t, ch, "ae.q")
	must(t, ch.QueueBind("ae.q", "", "ae", false, nil))
	must(t, ch.ExchangeDeclare("main", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "ae"}))
	declareQueue(t, ch, "main.q")
	must(t, ch.QueueBind("main.q", "k", "main", false, nil))

	// Routable: the alternate exchange is not involved.
	publishMandatory(t, ch, "main", "k")
	expectNoReturn(t, ch, returns)
	if got := drainQueue(t, ch, "main.q"); len(got) != 1 {
		t.Fatalf("main.q holds %q", got)
	}
	if got := drainQueue(t, ch, "ae.q"); len(got) != 0 {
		t.Fatalf("ae.q holds %q", got)
	}
	// Unroutable: the alternate exchange takes it, and it is not returned.
	publishMandatory(t, ch, "main", "other")
	expectNoReturn(t, ch, returns)
	if got := drainQueue(t, ch, "ae.q"); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("ae.q holds %q", got)
	}

	// Alternate exchanges chain; a loop of them ends.
	must(t, ch.ExchangeDeclare("chain1", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "chain2"}))
	must(t, ch.ExchangeDeclare("chain2", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "ae"}))
	publishMandatory(t, ch, "chain1", "x")
	expectNoReturn(t, ch, returns)
	if got := drainQueue(t, ch, "ae.q"); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("ae.q holds %q after the chain", got)
	}
	must(t, ch.ExchangeDeclare("loop1", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "loop2"}))
	must(t, ch.ExchangeDeclare("loop2", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "loop1"}))
	publishMandatory(t, ch, "loop1", "y")
	expectReturn(t, returns, "y")

	// The alternate exchange fails too (missing, or routes nowhere):
	// unroutable, so returned.
	must(t, ch.ExchangeDeclare("orphan", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "missing"}))
	publishMandatory(t, ch, "orphan", "z")
	expectReturn(t, returns, "z")
	must(t, ch.ExchangeDeclare("empty.ae", "fanout", false, false, false, false, nil))
	must(t, ch.ExchangeDeclare("main2", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "empty.ae"}))
	publishMandatory(t, ch, "main2", "w")
	expectReturn(t, returns, "w")

	// The argument is a longstr, compared on redeclaration.
	err := openChannel(t, n.dial(t)).ExchangeDeclare("bad.ae", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": int32(1)})
	wantError(t, err, amqp091.PreconditionFailed, "PRECONDITION_FAILED - invalid type 'signedint' for arg 'alternate-exchange' in exchange 'bad.ae' in vhost '/'")
	err = openChannel(t, n.dial(t)).ExchangeDeclare("main", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "other"})
	wantCode(t, err, amqp091.PreconditionFailed)
}

func TestExchangeToExchangeBindings(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	must(t, ch.ExchangeDeclare("e2e.src", "topic", false, false, false, false, nil))
	// The destination is internal: it cannot be published to, but it
	// receives from its source.
	must(t, ch.ExchangeDeclare("e2e.dst", "direct", false, false, true, false, nil))
	declareQueue(t, ch, "e2e.q")
	declareQueue(t, ch, "e2e.other")
	must(t, ch.QueueBind("e2e.q", "a.b", "e2e.dst", false, nil))
	must(t, ch.QueueBind("e2e.other", "a.c", "e2e.dst", false, nil))
	must(t, ch.ExchangeBind("e2e.dst", "a.*", "e2e.src", false, nil))
	must(t, ch.ExchangeBind("e2e.dst", "a.*", "e2e.src", false, nil)) // twice: no-op

	qs := []string{"e2e.q", "e2e.other"}
	checkRoutes(t, ch, "e2e.src", qs, map[string][]string{
		"a.b": {"e2e.q"},     // source matches a.*, destination a.b
		"a.c": {"e2e.other"}, // the destination routes with the same key
		"b.b": nil,           // the source does not match
		"a.d": nil,           // the destination does not match
	})

	// Unbinding stops it; unbinding what is not bound is fine.
	must(t, ch.ExchangeUnbind("e2e.dst", "a.*", "e2e.src", false, nil))
	checkRoutes(t, ch, "e2e.src", qs, map[string][]string{"a.b": nil})
	must(t, ch.ExchangeUnbind("e2e.dst", "a.*", "e2e.src", false, nil))

	// Deleting the destination removes the binding, so the source is no
	// longer in use.
	must(t, ch.ExchangeBind("e2e.dst", "#", "e2e.src", false, nil))
	wantCode(t, openChannel(t, c).ExchangeDelete("e2e.src", true, false), amqp091.PreconditionFailed)
	must(t, ch.ExchangeDelete("e2e.dst", false, false))
	must(t, ch.ExchangeDelete("e2e.src", true, false))
}

func TestExchangeBindingsLifecycle(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	must(t, ch.ExchangeDeclare("lc.src", "fanout", false, false, false, false, nil))
	must(t, ch.ExchangeDeclare("lc.dst", "fanout", false, false, false, false, nil))
	must(t, ch.ExchangeBind("lc.dst", "", "lc.src", false, nil))

	// if-unused counts bindings where the exchange is the source only.
	err := openChannel(t, c).ExchangeDelete("lc.src", true, false)
	wantCode(t, err, amqp091.PreconditionFailed)
	must(t, ch.ExchangeDelete("lc.dst", true, false))

	// Deleting the destination removed the binding: a new lc.dst does not
	// receive from lc.src.
	must(t, ch.ExchangeDeclare("lc.dst", "fanout", false, false, false, false, nil))
	declareQueue(t, ch, "lc.q")
	must(t, ch.QueueBind("lc.q", "", "lc.dst", false, nil))
	checkRoutes(t, ch, "lc.src", []string{"lc.q"}, map[string][]string{"k": nil})
	must(t, ch.ExchangeDelete("lc.src", true, false))

	// An auto-delete exchange goes when its last binding as source does.
	must(t, ch.ExchangeDeclare("lc.ad", "fanout", false, true, false, false, nil))
	must(t, ch.ExchangeBind("lc.dst", "", "lc.ad", false, nil))
	checkRoutes(t, ch, "lc.ad", []string{"lc.q"}, map[string][]string{"k": {"lc.q"}})
	must(t, ch.ExchangeUnbind("lc.dst", "", "lc.ad", false, nil))
	if exchangeExists(t, c, "lc.ad") {
		t.Fatal("auto-delete lc.ad survived losing its last binding")
	}
	// ... and when its destination is deleted.
	must(t, ch.ExchangeDeclare("lc.ad", "fanout", false, true, false, false, nil))
	must(t, ch.ExchangeBind("lc.dst", "", "lc.ad", false, nil))
	must(t, ch.ExchangeDelete("lc.dst", false, false))
	if exchangeExists(t, c, "lc.ad") {
		t.Fatal("auto-delete lc.ad survived its destination's deletion")
	}
	// Bindings to it as destination do not keep an auto-delete exchange.
	must(t, ch.ExchangeDeclare("lc.ad2", "fanout", false, true, false, false, nil))
	must(t, ch.ExchangeDeclare("lc.feed", "fanout", false, false, false, false, nil))
	must(t, ch.ExchangeBind("lc.ad2", "", "lc.feed", false, nil))
	declareQueue(t, ch, "lc.q2")
	must(t, ch.QueueBind("lc.q2", "", "lc.ad2", false, nil))
	checkRoutes(t, ch, "lc.feed", []string{"lc.q2"}, map[string][]string{"k": {"lc.q2"}})
	if _, err := ch.QueueDelete("lc.q2", false, false, false); err != nil {
		t.Fatal(err)
	}
	if exchangeExists(t, c, "lc.ad2") {
		t.Fatal("auto-delete lc.ad2 kept by a binding where it is the destination")
	}
}

func TestExchangeBindingCycle(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	must(t, ch.ExchangeDeclare("cyc1", "fanout", false, false, false, false, nil))
	must(t, ch.ExchangeDeclare("cyc2", "topic", false, false, false, false, nil))
	must(t, ch.ExchangeDeclare("cyc3", "direct", false, false, false, false, nil))
	must(t, ch.ExchangeBind("cyc2", "", "cyc1", false, nil))
	must(t, ch.ExchangeBind("cyc1", "#", "cyc2", false, nil))
	must(t, ch.ExchangeBind("cyc3", "#", "cyc2", false, nil))
	must(t, ch.ExchangeBind("cyc1", "k", "cyc3", false, nil))
	must(t, ch.ExchangeBind("cyc1", "", "cyc1", false, nil)) // to itself
	bindQueues(t, ch, "cyc1", map[string][]string{"cyc.q1": {""}})
	bindQueues(t, ch, "cyc2", map[string][]string{"cyc.q2": {"#"}})
	bindQueues(t, ch, "cyc3", map[string][]string{"cyc.q3": {"k"}})
	// Both routes reach cyc.q1 (directly, and round the cycle): one copy.
	qs := []string{"cyc.q1", "cyc.q2", "cyc.q3"}
	checkRoutes(t, ch, "cyc1", qs, map[string][]string{"k": qs, "j": {"cyc.q1", "cyc.q2"}})
	checkRoutes(t, ch, "cyc2", qs, map[string][]string{"k": qs})
	checkRoutes(t, ch, "cyc3", qs, map[string][]string{"k": qs, "j": nil})
}

func TestExchangeBindingsSurviveRestart(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	must(t, ch.ExchangeDeclare("dur.src", "direct", true, false, false, false, nil))
	must(t, ch.ExchangeDeclare("dur.dst", "fanout", true, false, false, false, nil))
	must(t, ch.ExchangeDeclare("dur.gone", "fanout", true, false, false, false, nil))
	must(t, ch.ExchangeDeclare("tmp.dst", "fanout", false, false, false, false, nil))
	must(t, ch.ExchangeDeclare("dur.hdr", "headers", true, false, false, false, nil))
	_, err := ch.QueueDeclare("dur.e2e", true, false, false, false, classicArgs)
	must(t, err)
	must(t, ch.QueueBind("dur.e2e", "", "dur.dst", false, nil))
	must(t, ch.ExchangeBind("dur.dst", "k", "dur.src", false, nil))
	must(t, ch.ExchangeBind("dur.dst", "", "dur.hdr", false, amqp091.Table{"x-match": "any", "h": "v"}))
	must(t, ch.ExchangeBind("tmp.dst", "k", "dur.src", false, nil)) // to a transient exchange
	must(t, ch.ExchangeBind("dur.gone", "gone", "dur.src", false, nil))
	must(t, ch.ExchangeUnbind("dur.gone", "gone", "dur.src", false, nil))

	n.restart()
	ch = openChannel(t, n.dial(t))
	publishBody(t, ch, "dur.src", "k", "via e2e")
	publishBody(t, ch, "dur.src", "gone", "not bound")
	publish(t, ch, "dur.hdr", "", amqp091.Publishing{Headers: amqp091.Table{"h": "v"}, Body: []byte("via headers")})
	publish(t, ch, "dur.hdr", "", amqp091.Publishing{Headers: amqp091.Table{"h": "w"}, Body: []byte("no match")})
	testwait.For(t, 5*time.Second, "2 messages in dur.e2e", func() bool {
		q, err := ch.QueueDeclarePassive("dur.e2e", true, false, false, false, classicArgs)
		return err == nil && q.Messages == 2
	})
	got := drainQueue(t, ch, "dur.e2e")
	slices.Sort(got)
	if !slices.Equal(got, []string{"via e2e", "via headers"}) {
		t.Fatalf("dur.e2e holds %q", got)
	}
	// Deleting the destination deletes its stored binding too.
	must(t, ch.ExchangeDelete("dur.dst", false, false))
	n.restart()
	ch = openChannel(t, n.dial(t))
	must(t, ch.ExchangeDelete("dur.src", true, false))
}

func TestSenderSelectedDistribution(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	must(t, ch.ExchangeDeclare("ssd", "direct", false, false, false, false, nil))
	bindQueues(t, ch, "ssd", map[string][]string{"ssd.a": {"a"}, "ssd.b": {"b"}, "ssd.c": {"c"}, "ssd.d": {"d"}})
	publish(t, ch, "ssd", "a", amqp091.Publishing{
		Headers: amqp091.Table{"CC": []any{"b", "a"}, "BCC": []any{"c"}, "other": "kept"},
		Body:    []byte("m"),
	})
	for _, q := range []string{"ssd.a", "ssd.b", "ssd.c"} {
		d, ok, err := ch.Get(q, true)
		must(t, err)
		if !ok {
			t.Fatalf("%s got nothing", q)
		}
		if _, has := d.Headers["BCC"]; has {
			t.Errorf("%s: BCC header delivered: %v", q, d.Headers)
		}
		if cc, _ := d.Headers["CC"].([]any); len(cc) != 2 || d.Headers["other"] != "kept" {
			t.Errorf("%s: headers %v, want CC and other kept", q, d.Headers)
		}
		if more := drainQueue(t, ch, q); len(more) != 0 {
			t.Errorf("%s got %d more copies", q, len(more))
		}
	}
	if got := drainQueue(t, ch, "ssd.d"); len(got) != 0 {
		t.Errorf("ssd.d got %q", got)
	}
	// Through the default exchange too.
	publish(t, ch, "", "ssd.a", amqp091.Publishing{Headers: amqp091.Table{"BCC": []any{"ssd.d"}}, Body: []byte("m")})
	if got := drainQueue(t, ch, "ssd.d"); len(got) != 1 {
		t.Errorf("ssd.d got %q via the default exchange's BCC", got)
	}
	if got := drainQueue(t, ch, "ssd.a"); len(got) != 1 {
		t.Errorf("ssd.a got %q via the default exchange", got)
	}
}

func TestExchangeBindErrors(t *testing.T) {
	n := startNode(t, withSeed(limitedSeed()))
	admin := openChannel(t, n.dial(t))
	must(t, admin.ExchangeDeclare("other.x", "fanout", false, false, false, false, nil))
	must(t, admin.ExchangeDeclare("x.src", "fanout", false, false, false, false, nil))
	c := n.dial(t)

	cases := []struct {
		name string
		op   func(*amqp091.Channel) error
		code int
		text string
	}{
		{"missing source", func(ch *amqp091.Channel) error { return ch.ExchangeBind("other.x", "", "nope", false, nil) },
			amqp091.NotFound, "NOT_FOUND - no exchange 'nope' in vhost '/'"},
		{"missing destination", func(ch *amqp091.Channel) error { return ch.ExchangeBind("nope", "", "x.src", false, nil) },
			amqp091.NotFound, "NOT_FOUND - no exchange 'nope' in vhost '/'"},
		{"unbind missing source", func(ch *amqp091.Channel) error { return ch.ExchangeUnbind("other.x", "", "nope", false, nil) },
			amqp091.NotFound, "NOT_FOUND - no exchange 'nope' in vhost '/'"},
		{"default source", func(ch *amqp091.Channel) error { return ch.ExchangeBind("other.x", "", "", false, nil) },
			amqp091.AccessRefused, "ACCESS_REFUSED - operation not permitted on the default exchange"},
		{"default destination", func(ch *amqp091.Channel) error { return ch.ExchangeBind("", "", "x.src", false, nil) },
			amqp091.AccessRefused, "ACCESS_REFUSED - operation not permitted on the default exchange"},
	}
	for _, tc := range cases {
		wantError(t, tc.op(openChannel(t, c)), tc.code, tc.text)
	}

	// Permissions: write on the destination, read on the source, and for
	// an alternate exchange read on the exchange, write on the AE.
	lc := n.dialAs(t, "limited", "secret", "/")
	lim := openChannel(t, lc)
	must(t, lim.ExchangeDeclare("lim.a", "fanout", false, false, false, false, nil))
	must(t, lim.ExchangeDeclare("lim.b", "fanout", false, false, false, false, nil))
	must(t, lim.ExchangeBind("lim.b", "", "lim.a", false, nil))
	must(t, lim.ExchangeDeclare("lim.ae", "fanout", false, false, false, false, amqp091.Table{"alternate-exchange": "lim.b"}))
	refused := func(perm, name string) string {
		return "ACCESS_REFUSED - " + perm + " access to exchange '" + name + "' in vhost '/' refused for user 'limited'"
	}
	perms := []struct {
		name string
		op   func(*amqp091.Channel) error
		text string
	}{
		{"bind to a destination without write", func(ch *amqp091.Channel) error { return ch.ExchangeBind("other.x", "", "lim.a", false, nil) },
			refused("write", "other.x")},
		{"bind from a source without read", func(ch *amqp091.Channel) error { return ch.ExchangeBind("lim.a", "", "other.x", false, nil) },
			refused("read", "other.x")},
		{"unbind from a source without read", func(ch *amqp091.Channel) error { return ch.ExchangeUnbind("lim.a", "", "other.x", false, nil) },
			refused("read", "other.x")},
		{"alternate exchange without write", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("lim.ae2", "fanout", false, false, false, false, amqp091.Table{"alternate-exchange": "other.x"})
		}, refused("write", "other.x")},
	}
	for _, tc := range perms {
		wantError(t, tc.op(openChannel(t, lc)), amqp091.AccessRefused, tc.text)
	}
}
