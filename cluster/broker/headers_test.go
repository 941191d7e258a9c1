package broker

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

func TestHeadersMatch(t *testing.T) {
	msg := wire.Table{
		"format": "pdf",
		"type":   "report",
		"n":      int64(3),
		"blob":   []byte("raw"),
		"x-tier": "gold",
		"when":   time.Unix(42, 0).UTC(),
	}
	cases := []struct {
		name string
		args wire.Table
		want bool
	}{
		{"all default, all present", wire.Table{"format": "pdf", "type": "report"}, true},
		{"all, one differs", wire.Table{"x-match": "all", "format": "pdf", "type": "log"}, false},
		{"all, one missing", wire.Table{"format": "pdf", "lang": "en"}, false},
		{"all, no pairs matches everything", wire.Table{}, true},
		{"all, only x- keys", wire.Table{"x-match": "all", "x-tier": "silver"}, true},
		{"any, one matches", wire.Table{"x-match": "any", "format": "zip", "type": "report"}, true},
		{"any, none matches", wire.Table{"x-match": "any", "format": "zip", "lang": "en"}, false},
		{"any, no pairs matches nothing", wire.Table{"x-match": "any"}, false},
		{"any ignores x- keys", wire.Table{"x-match": "any", "x-tier": "gold"}, false},
		{"all ignores x- keys", wire.Table{"x-match": "all", "format": "pdf", "x-tier": "silver"}, true},
		{"all-with-x counts x- keys", wire.Table{"x-match": "all-with-x", "format": "pdf", "x-tier": "silver"}, false},
		{"all-with-x, x- key equal", wire.Table{"x-match": "all-with-x", "format": "pdf", "x-tier": "gold"}, true},
		{"any-with-x, x- key matches", wire.Table{"x-match": "any-with-x", "x-tier": "gold"}, true},
		{"any-with-x, x- key differs", wire.Table{"x-match": "any-with-x", "x-tier": "bronze"}, false},
		{"void matches presence", wire.Table{"format": nil}, true},
		{"void needs presence", wire.Table{"lang": nil}, false},
		{"void with any", wire.Table{"x-match": "any", "lang": nil, "type": nil}, true},
		{"numbers compare by value", wire.Table{"n": int8(3)}, true},
		{"numbers compare by value, float", wire.Table{"n": float64(3)}, true},
		{"number differs", wire.Table{"n": int32(4)}, false},
		{"number is not a string", wire.Table{"n": "3"}, false},
		{"bytearray equals longstr", wire.Table{"blob": "raw", "format": []byte("pdf")}, true},
		{"timestamp is its seconds", wire.Table{"when": int64(42)}, true},
		{"invalid x-match acts as all", wire.Table{"x-match": "some", "format": "pdf"}, true},
	}
	for _, c := range cases {
		m, _ := compileHeadersMatch(c.args)
		if got := m.match(msg); got != c.want {
			t.Errorf("%s: %v matched %v, want %v", c.name, c.args, got, c.want)
		}
	}
	// No headers at all: only an all binding without pairs matches.
	if m, _ := compileHeadersMatch(wire.Table{"a": "b"}); m.match(nil) {
		t.Error("all binding matched a message without headers")
	}
	if m, _ := compileHeadersMatch(nil); !m.match(nil) {
		t.Error("empty all binding did not match a message without headers")
	}
}

func TestHeadersBindingValidation(t *testing.T) {
	for _, ok := range []string{"all", "any", "all-with-x", "any-with-x"} {
		if err := validateHeadersBinding(wire.Table{"x-match": ok}); err != nil {
			t.Errorf("x-match %s: %v", ok, err)
		}
	}
	for _, bad := range []any{"some", int32(1)} {
		err := validateHeadersBinding(wire.Table{"x-match": bad})
		if e, ok := err.(*wire.Error); !ok || e.Code != wire.PreconditionFailed {
			t.Errorf("x-match %v: got %v, want 406", bad, err)
		}
	}
}

// testVhost is a vhost with no broker behind it: enough to route.
func testVhost() *Vhost {
	return newVhost(&Broker{}, catalog.Vhost{Name: "/"})
}

func (v *Vhost) testExchange(name, typ string, args wire.Table) *exchange {
	x := newExchange(catalog.Exchange{Vhost: v.name, Name: name, Type: typ}, args)
	v.exchanges[name] = x
	return x
}

func (v *Vhost) testQueue(name string) *Queue {
	q := &Queue{vhost: v, rec: catalog.Queue{Name: name}, bindings: make(map[*binding]*exchange)}
	v.queues[name] = q
	return q
}

func testBind(x *exchange, q *Queue, dest *exchange, key string) {
	b := &binding{key: bindingKey{routingKey: key}, queue: q, dest: dest}
	if q != nil {
		b.key.destination = q.rec.Name
	} else {
		b.key.destination, b.key.toExchange = dest.rec.Name, true
	}
	x.add(b, nil)
}

func routeNames(t *testing.T, v *Vhost, x string, keys ...string) map[string]int {
	t.Helper()
	qs, err := v.Route(x, keys, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, q := range qs {
		got[q.rec.Name]++
	}
	return got
}

func TestRouteExchangeGraph(t *testing.T) {
	v := testVhost()
	x1 := v.testExchange("x1", ExchangeFanout, nil)
	x2 := v.testExchange("x2", ExchangeDirect, wire.Table{"alternate-exchange": "ae"})
	ae := v.testExchange("ae", ExchangeFanout, nil)
	q1, q2, qa := v.testQueue("q1"), v.testQueue("q2"), v.testQueue("qa")
	testBind(x1, q1, nil, "")
	testBind(x1, nil, x2, "")
	testBind(x2, nil, x1, "k") // cycle x1 -> x2 -> x1
	testBind(x2, q2, nil, "k")
	testBind(ae, qa, nil, "")

	if got := routeNames(t, v, "x1", "k"); len(got) != 2 || got["q1"] != 1 || got["q2"] != 1 {
		t.Errorf("x1 with k reached %v, want q1 and q2 once", got)
	}
	// x2 matches nothing with "other": its alternate exchange takes it.
	if got := routeNames(t, v, "x1", "other"); len(got) != 2 || got["q1"] != 1 || got["qa"] != 1 {
		t.Errorf("x1 with other reached %v, want q1 and qa", got)
	}
	if got := routeNames(t, v, "x2", "other"); len(got) != 1 || got["qa"] != 1 {
		t.Errorf("x2 with other reached %v, want qa", got)
	}
	// CC keys: every key routes.
	if got := routeNames(t, v, "x2", "k", "other"); len(got) != 2 || got["q1"] != 1 || got["q2"] != 1 {
		t.Errorf("x2 with k and other reached %v, want q1 and q2", got)
	}
	// A binding that matched counts as routed even if what it leads to
	// routes nowhere: the alternate exchange is not used (RabbitMQ's
	// process_alternate looks at the exchange's own destinations).
	y := v.testExchange("y", ExchangeFanout, wire.Table{"alternate-exchange": "ae"})
	testBind(y, nil, v.testExchange("nowhere", ExchangeFanout, nil), "")
	if got := routeNames(t, v, "y", "k"); len(got) != 0 {
		t.Errorf("y reached %v, want nothing", got)
	}
	// An alternate exchange that loops back to its exchange terminates.
	ae.add(&binding{key: bindingKey{destination: "x2", toExchange: true}, dest: x2}, nil)
	if got := routeNames(t, v, "x2", "other"); len(got) != 1 || got["qa"] != 1 {
		t.Errorf("x2 with other, ae looping back, reached %v, want qa", got)
	}
}

func TestRouteDoesNotAllocate(t *testing.T) {
	v := testVhost()
	d := v.testExchange("d", ExchangeDirect, nil)
	f := v.testExchange("f", ExchangeFanout, nil)
	for _, n := range []string{"a", "b", "c"} {
		q := v.testQueue(n)
		testBind(d, q, nil, "k")
		testBind(f, q, nil, "")
	}
	out := make([]*Queue, 0, 8)
	keys := []string{"k"}
	for _, x := range []string{"d", "f", ""} {
		allocs := testing.AllocsPerRun(100, func() {
			out, _ = v.Route(x, keys, nil, out[:0])
		})
		if allocs != 0 {
			t.Errorf("routing through %q allocates %v times", x, allocs)
		}
	}
}
