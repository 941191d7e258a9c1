package raftq

import (
	"reflect"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
)

// TestRecordDeathLayout checks RecordDeath against the dead-lettering
// guide's x-death table and RabbitMQ 4.3's mc_amqpl:death_table/7: newest
// entry first, one per (queue, reason), count a long, time the first
// death's timestamp in whole seconds, exchange and routing-keys of the
// first death, original-expiration when the message had one.
func TestRecordDeathLayout(t *testing.T) {
	orig := wire.Table{"app": "x"}
	h1 := RecordDeath(orig, Death{
		Queue: "work", Reason: ReasonExpired, Time: 1_700_000_000_999,
		Exchange: "orders", RoutingKeys: []string{"eu", "cc-key"},
		Expiration: "60000", HasExpiration: true,
	})
	first := wire.Table{
		"count":               int64(1),
		"reason":              "expired",
		"queue":               "work",
		"time":                time.Unix(1_700_000_000, 0).UTC(),
		"exchange":            "orders",
		"routing-keys":        []any{"eu", "cc-key"},
		"original-expiration": "60000",
	}
	want := wire.Table{
		"app":                    "x",
		"x-death":                []any{first},
		"x-first-death-queue":    "work",
		"x-first-death-reason":   "expired",
		"x-first-death-exchange": "orders",
		"x-last-death-queue":     "work",
		"x-last-death-reason":    "expired",
		"x-last-death-exchange":  "orders",
	}
	if !reflect.DeepEqual(h1, want) {
		t.Fatalf("first death:\n got %#v\nwant %#v", h1, want)
	}
	if len(orig) != 1 {
		t.Fatal("RecordDeath modified its input")
	}

	// A second death, from another queue and for another reason: a new
	// entry in front; the first-death headers stay.
	h2 := RecordDeath(h1, Death{Queue: "retry", Reason: ReasonRejected, Time: 1_700_000_100_000, Exchange: "dlx", RoutingKeys: []string{"work"}})
	second := wire.Table{
		"count": int64(1), "reason": "rejected", "queue": "retry",
		"time": time.Unix(1_700_000_100, 0).UTC(), "exchange": "dlx", "routing-keys": []any{"work"},
	}
	if got := h2["x-death"]; !reflect.DeepEqual(got, []any{second, first}) {
		t.Fatalf("second death: x-death = %#v", got)
	}
	if h2["x-first-death-queue"] != "work" || h2["x-last-death-queue"] != "retry" ||
		h2["x-last-death-reason"] != "rejected" || h2["x-last-death-exchange"] != "dlx" {
		t.Fatalf("second death: headers %#v", h2)
	}

	// The first again: its entry counts 2, moves to the front, and keeps
	// its first time, exchange and routing keys.
	h3 := RecordDeath(h2, Death{Queue: "work", Reason: ReasonExpired, Time: 1_700_000_200_000, Exchange: "dlx", RoutingKeys: []string{"other"}})
	again := wire.Table{}
	for k, v := range first {
		again[k] = v
	}
	again["count"] = int64(2)
	if got := h3["x-death"]; !reflect.DeepEqual(got, []any{again, second}) {
		t.Fatalf("repeated death: x-death = %#v", got)
	}
	if h3["x-last-death-queue"] != "work" || h3["x-last-death-exchange"] != "dlx" || h3["x-first-death-reason"] != "expired" {
		t.Fatalf("repeated death: headers %#v", h3)
	}
	if c := h2["x-death"].([]any)[1].(wire.Table)["count"]; c != int64(1) {
		t.Fatal("RecordDeath modified an entry of its input")
	}
}

// TestRecordDeathSurvivesTheWire: the headers encode as an AMQP table and
// decode to the same values, and a decoded x-death (with a count of another
// integer type, as a client might send) is updated in place.
func TestRecordDeathSurvivesTheWire(t *testing.T) {
	h := RecordDeath(nil, Death{Queue: "q", Reason: ReasonMaxLen, Time: 5000, Exchange: "", RoutingKeys: []string{"q"}})
	b, err := wire.AppendTable(nil, h)
	if err != nil {
		t.Fatal(err)
	}
	dec, _, err := wire.DecodeTable(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dec, h) {
		t.Fatalf("decoded %#v, want %#v", dec, h)
	}
	dec["x-death"].([]any)[0].(wire.Table)["count"] = int32(4)
	h2 := RecordDeath(dec, Death{Queue: "q", Reason: ReasonMaxLen, Time: 9000})
	deaths := h2["x-death"].([]any)
	if len(deaths) != 1 || deaths[0].(wire.Table)["count"] != int64(5) {
		t.Fatalf("x-death = %#v", deaths)
	}
	if _, err := wire.AppendTable(nil, h2); err != nil {
		t.Fatal(err)
	}
}
