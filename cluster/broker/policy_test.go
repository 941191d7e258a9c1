package broker

import (
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/raftq/replica"
)

func mustDef(t *testing.T, s string) wire.Table {
	t.Helper()
	d, err := DefinitionFromJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func testPolicy(t *testing.T, name, pattern, applyTo string, priority int, def string) *policy {
	t.Helper()
	rec, err := policyRecord(PolicyDef{Name: name, Pattern: pattern, ApplyTo: applyTo, Priority: priority, Definition: mustDef(t, def)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := compilePolicy(rec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefinitionFromJSON(t *testing.T) {
	d := mustDef(t, `{"max-length":10,"message-ttl":1.5,"dead-letter-exchange":"dlx","x":{"a":[1,true]}}`)
	want := wire.Table{"max-length": int64(10), "message-ttl": 1.5, "dead-letter-exchange": "dlx", "x": wire.Table{"a": []any{int64(1), true}}}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("got %#v", d)
	}
	if got := DefinitionJSON(d); got != `{"dead-letter-exchange":"dlx","max-length":10,"message-ttl":1.5,"x":{"a":[1,true]}}` {
		t.Fatalf("JSON %s", got)
	}
	for _, bad := range []string{`[1]`, `{`, `{"a":1} x`, `"s"`} {
		if _, err := DefinitionFromJSON(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// The texts are rabbit_policy's and rabbit_policies' (RabbitMQ 4.3).
func TestValidatePolicy(t *testing.T) {
	cases := []struct {
		def      string
		applyTo  string
		operator bool
		err      string
	}{
		{`{"max-length":10,"overflow":"reject-publish"}`, "queues", false, ""},
		{`{"alternate-exchange":"ae"}`, "exchanges", false, ""},
		{`{"max-length":-1}`, "all", false, "-1 is not a valid maximum length"},
		{`{"max-length":"ten"}`, "all", false, `<<"ten">> is not a valid maximum length`},
		{`{"expires":0}`, "all", false, "0 is not a valid queue expiry"},
		{`{"overflow":"nope"}`, "all", false, `<<"nope">> is not a valid overflow value`},
		{`{"queue-leader-locator":"far"}`, "all", false, `<<"far">> is not a valid queue leader locator value`},
		{`{"delivery-limit":-1}`, "all", false, ""},
		{`{"consumer-timeout":60000}`, "quorum_queues", false, ""},
		{`{"max-priority":5}`, "all", false, `[{<<"max-priority">>,5}] are not recognised policy settings`},
		{`{"foo":1,"bar":"x"}`, "all", false, `[{<<"bar">>,<<"x">>},{<<"foo">>,1}] are not recognised policy settings`},
		{`{}`, "all", false, "no policy provided"},
		{`{"max-length":1}`, "stuff", false, "apply-to 'stuff' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'"},
		{`{"max-length":1,"delivery-limit":3}`, "queues", true, ""},
		{`{"dead-letter-exchange":"x"}`, "queues", true, `[{<<"dead-letter-exchange">>,<<"x">>}] are not recognised policy settings`},
		{`{"delayed-retry-type":"failed","delayed-retry-min":100,"delayed-retry-max":5000}`, "quorum_queues", true, ""},
		{`{"delayed-retry-type":"disabled"}`, "quorum_queues", false, ""},
		{`{"delayed-retry-type":"sometimes","delayed-retry-min":1}`, "all", false, `<<"sometimes">> is not a valid delayed retry type. Must be one of: all, failed, returned, disabled`},
		{`{"delayed-retry-min":0}`, "all", false, "0 is not a valid delayed retry minimum delay. Must be a positive integer"},
		{`{"delayed-retry-type":"all"}`, "all", false, "delayed-retry-min is required when delayed-retry-type is all"},
		{`{"delayed-retry-type":"all","delayed-retry-min":500,"delayed-retry-max":100}`, "all", false, "delayed-retry-max (100) must not be smaller than delayed-retry-min (500)"},
		{`{"queue-master-locator":"min-masters"}`, "classic_queues", true, ""},
		{`{"queue-master-locator":"far"}`, "all", false, `<<"far">> is not a valid master locator`},
	}
	for _, c := range cases {
		d := PolicyDef{Name: "p", Pattern: ".*", ApplyTo: c.applyTo, Operator: c.operator, Definition: mustDef(t, c.def)}
		err := validatePolicy(&d, false)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err {
			t.Errorf("%s (apply-to %s, operator %v): got %q, want %q", c.def, c.applyTo, c.operator, got, c.err)
		}
	}
}

// With the deprecated feature denied (--queue-master-locator=deny), as
// RabbitMQ 4.3 by default, the key is refused whatever its value.
func TestValidatePolicyDeniesMasterLocator(t *testing.T) {
	d := PolicyDef{Name: "p", Pattern: ".*", ApplyTo: "all", Definition: mustDef(t, `{"max-length":1,"queue-master-locator":"client-local"}`)}
	err := validatePolicy(&d, true)
	if want := "use of deprecated queue-master-locator argument is not permitted"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestPolicyMatching(t *testing.T) {
	set := map[string]*policy{
		"low":     testPolicy(t, "low", ".*", "all", 0, `{"max-length":1}`),
		"high":    testPolicy(t, "high", "^q", "queues", 5, `{"max-length":2}`),
		"high-b":  testPolicy(t, "high-b", "^q", "queues", 5, `{"max-length":3}`),
		"quorum":  testPolicy(t, "quorum", "^q", "quorum_queues", 9, `{"delivery-limit":3}`),
		"streams": testPolicy(t, "streams", ".*", "streams", 99, `{"max-length":4}`),
		"ex":      testPolicy(t, "ex", ".*", "exchanges", 50, `{"alternate-exchange":"ae"}`),
	}
	name := func(p *policy) string {
		if p == nil {
			return ""
		}
		return p.rec.Name
	}
	queue := func(n, typ string) string {
		return name(pick(set, func(p *policy) bool { return p.matchesQueue(n, typ) }))
	}
	if got := queue("qa", QueueTypeQuorum); got != "quorum" {
		t.Errorf("quorum queue qa: %s", got)
	}
	// delivery-limit is not applicable to classic queues: that policy
	// does not apply at all (rabbit_queue_type:is_policy_applicable/2);
	// between equal priorities, the first name.
	if got := queue("qa", QueueTypeClassic); got != "high" {
		t.Errorf("classic queue qa: %s", got)
	}
	if got := queue("other", QueueTypeClassic); got != "low" {
		t.Errorf("classic queue other: %s", got)
	}
	if got := name(pick(set, func(p *policy) bool { return p.matchesExchange("qx") })); got != "ex" {
		t.Errorf("exchange: %s", got)
	}
	mp := testPolicy(t, "mp", ".*", "all", 0, `{"queue-mode":"lazy"}`)
	if mp.matchesQueue("q", QueueTypeQuorum) || !mp.matchesQueue("q", QueueTypeClassic) {
		t.Error("queue-mode applies to classic queues only")
	}
}

func TestEffectiveArgs(t *testing.T) {
	pol := testPolicy(t, "p", ".*", "all", 0, `{"max-length":5,"overflow":"reject-publish","dead-letter-exchange":"pdlx","message-ttl":1000,"delivery-limit":10,"queue-leader-locator":"client-local","consumer-timeout":5000}`)
	op := testPolicy(t, "o", ".*", "all", 0, `{"max-length":3,"delivery-limit":-1,"overflow":"drop-head"}`)
	cases := []struct {
		name    string
		typ     string
		args    wire.Table
		pol, op *policy
		want    wire.Table
	}{
		{"no policy: the arguments themselves", QueueTypeQuorum, wire.Table{"x-max-length": int32(9)}, nil, nil, wire.Table{"x-max-length": int32(9)}},
		{"policy only", QueueTypeQuorum, nil, pol, nil, wire.Table{
			"x-max-length": int64(5), "x-overflow": "reject-publish", "x-dead-letter-exchange": "pdlx", "x-message-ttl": int64(1000),
			"x-delivery-limit": int64(10), "x-queue-leader-locator": "client-local", "x-consumer-timeout": int64(5000)}},
		{"numbers: the lower; dead-lettering: the argument; overflow and locator: the policy (quorum)", QueueTypeQuorum,
			wire.Table{"x-max-length": int32(2), "x-message-ttl": int32(5000), "x-dead-letter-exchange": "adlx", "x-overflow": "drop-head",
				"x-queue-leader-locator": "balanced", "x-delivery-limit": int32(20)},
			pol, nil, wire.Table{
				"x-max-length": int64(2), "x-overflow": "reject-publish", "x-dead-letter-exchange": "adlx", "x-message-ttl": int64(1000),
				"x-delivery-limit": int64(10), "x-queue-leader-locator": "client-local", "x-consumer-timeout": int64(5000)}},
		{"classic: overflow is the argument's; no delivery-limit or locator", QueueTypeClassic,
			wire.Table{"x-overflow": "drop-head"}, testPolicy(t, "c", ".*", "all", 0, `{"overflow":"reject-publish","max-length":5}`), nil,
			wire.Table{"x-overflow": "drop-head", "x-max-length": int64(5)}},
		{"operator policy: the lower of it and the policy, then of that and the argument; unlimited delivery-limit yields", QueueTypeQuorum,
			wire.Table{"x-max-length": int32(4)}, pol, op, wire.Table{
				"x-max-length": int64(3), "x-overflow": "drop-head", "x-dead-letter-exchange": "pdlx", "x-message-ttl": int64(1000),
				"x-delivery-limit": int64(10), "x-queue-leader-locator": "client-local", "x-consumer-timeout": int64(5000)}},
		{"unlimited delivery-limit argument against a policy's limit: the limit", QueueTypeQuorum,
			wire.Table{"x-delivery-limit": int32(-1)}, testPolicy(t, "d", ".*", "all", 0, `{"delivery-limit":7}`), nil,
			wire.Table{"x-delivery-limit": int64(7)}},
		{"routing key without an exchange is dropped", QueueTypeQuorum,
			nil, testPolicy(t, "rk", ".*", "all", 0, `{"dead-letter-routing-key":"k"}`), nil, wire.Table{}},
		{"delayed retry: the policy's type, the lower minimum and maximum; merged with an operator policy's: its type, the longer minimum, the shorter maximum", QueueTypeQuorum,
			wire.Table{"x-delayed-retry-type": "returned", "x-delayed-retry-min": int32(150), "x-delayed-retry-max": int32(9000)},
			testPolicy(t, "r", ".*", "all", 0, `{"delayed-retry-type":"all","delayed-retry-min":100,"delayed-retry-max":5000}`),
			testPolicy(t, "ro", ".*", "all", 0, `{"delayed-retry-type":"failed","delayed-retry-min":200,"delayed-retry-max":4000}`),
			wire.Table{"x-delayed-retry-type": "failed", "x-delayed-retry-min": int64(150), "x-delayed-retry-max": int64(4000)}},
	}
	for _, c := range cases {
		got := effectiveArgs(c.typ, c.args, c.pol, c.op)
		if len(got) != len(c.want) || !tablesEqual(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, c.want)
		}
	}
}

func newTestBroker(t *testing.T) *Broker {
	t.Helper()
	b := openTestBroker(t, t.TempDir())
	t.Cleanup(func() { closeTestBroker(b) })
	return b
}

// openTestBroker opens a standalone broker on dir's store, the one it
// left there if any; the caller closes it.
func openTestBroker(t *testing.T, dir string) *Broker {
	t.Helper()
	store, err := catalog.OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The node opens a standalone node's write-ahead log (cluster/node).
	qlog, err := replica.OpenNodeWAL(dir, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{DataDir: dir, Seed: DefaultSeed(), Replica: replica.Config{WAL: qlog}}, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// closeTestBroker closes a broker openTestBroker opened, then its
// write-ahead log, as the node does.
func closeTestBroker(b *Broker) {
	b.Close()
	b.cfg.Replica.WAL.Close()
}

func TestBrokerPolicies(t *testing.T) {
	b := newTestBroker(t)
	v := b.vhost("/")
	q, _, err := v.DeclareQueue(nil, 1, QueueDeclare{Name: "ex-q", Exclusive: true, Arguments: wire.Table{"x-max-length": int32(7)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetPolicy(PolicyDef{Vhost: "/", Name: "lim", Pattern: "^ex-", ApplyTo: "queues", Definition: mustDef(t, `{"max-length":3}`)}); err != nil {
		t.Fatal(err)
	}
	pol, op, eff, ok := b.QueuePolicies("/", "ex-q")
	if !ok || pol != "lim" || op != "" || eff["x-max-length"] != int64(3) {
		t.Fatalf("after the policy: %q %q %v", pol, op, eff)
	}
	if err := b.SetPolicy(PolicyDef{Vhost: "/", Name: "lim", Operator: true, Pattern: ".*", Definition: mustDef(t, `{"max-length":1}`)}); err != nil {
		t.Fatal(err)
	}
	if got := q.EffectiveArguments()["x-max-length"]; got != int64(1) {
		t.Fatalf("with the operator policy: %v", got)
	}
	if ps := b.Policies("", true); len(ps) != 1 || ps[0].ApplyTo != "all" || !ps[0].Operator {
		t.Fatalf("operator policies %+v", ps)
	}
	if err := b.ClearPolicy("/", "lim", false); err != nil {
		t.Fatal(err)
	}
	if err := b.ClearPolicy("/", "lim", false); !errors.Is(err, ErrNoPolicy) {
		t.Fatalf("clearing again: %v", err)
	}
	if got := q.EffectiveArguments()["x-max-length"]; got != int64(1) {
		t.Fatalf("operator policy alone: %v", got)
	}
	var pe *PolicyError
	if err := b.SetPolicy(PolicyDef{Vhost: "/", Name: "x", Pattern: ".*", Definition: mustDef(t, `{"max-length":"a"}`)}); !errors.As(err, &pe) {
		t.Fatalf("invalid policy: %v", err)
	}
	if err := b.SetPolicy(PolicyDef{Vhost: "nope", Name: "x", Pattern: ".*", Definition: mustDef(t, `{"max-length":1}`)}); err == nil {
		t.Fatal("policy in a missing vhost accepted")
	}
}

// A policy's alternate-exchange routes what an exchange routes nowhere;
// the exchange's own argument beats it.
func TestPolicyAlternateExchange(t *testing.T) {
	b := newTestBroker(t)
	v := b.vhost("/")
	for _, d := range []ExchangeDeclare{
		{Name: "x", Type: ExchangeDirect, Durable: true},
		{Name: "y", Type: ExchangeDirect, Durable: true, Arguments: wire.Table{"alternate-exchange": "ae2"}},
		{Name: "ae", Type: ExchangeFanout, Durable: true},
		{Name: "ae2", Type: ExchangeFanout, Durable: true},
	} {
		if err := v.DeclareExchange(nil, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"qa", "qa2"} {
		if _, _, err := v.DeclareQueue(nil, 1, QueueDeclare{Name: n, Exclusive: true}); err != nil {
			t.Fatal(err)
		}
	}
	v.mu.Lock()
	testBind(v.exchanges["ae"], v.queues["qa"], nil, "")
	testBind(v.exchanges["ae2"], v.queues["qa2"], nil, "")
	v.mu.Unlock()
	if got := routeNames(t, v, "x", "k"); len(got) != 0 {
		t.Fatalf("before the policy: %v", got)
	}
	if err := b.SetPolicy(PolicyDef{Vhost: "/", Name: "ae", Pattern: "^[xy]$", ApplyTo: "exchanges", Definition: mustDef(t, `{"alternate-exchange":"ae"}`)}); err != nil {
		t.Fatal(err)
	}
	if got := routeNames(t, v, "x", "k"); len(got) != 1 || got["qa"] != 1 {
		t.Fatalf("x with the policy: %v", got)
	}
	if got := routeNames(t, v, "y", "k"); len(got) != 1 || got["qa2"] != 1 {
		t.Fatalf("y keeps its argument: %v", got)
	}
	if err := b.ClearPolicy("/", "ae", false); err != nil {
		t.Fatal(err)
	}
	if got := routeNames(t, v, "x", "k"); len(got) != 0 {
		t.Fatalf("after clearing: %v", got)
	}
}
