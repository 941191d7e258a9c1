package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// workloadsHistory is a clean history in which every workload left its
// trace: the messages of cleanHistory; a multi-frame message delivered
// intact; a consumer that dropped its connection holding a message, which
// came again, flagged; and a single active consumer queue, "sac", with two
// publishing channels whose first deliveries interleave, each in its
// channel's order, and a redelivery that comes after later messages
// (exempt).
func workloadsHistory() *history {
	h := cleanHistory()
	h.expect = expectations{Ordered: []string{"sac"}, Large: []string{"large"}, Crashing: true}
	big := h.publishOn("large", "n0", "n0/1")
	h.sized(big, 20000)
	h.confirm(big)
	ackedOK(h, big, "large", false)
	held := h.publish("q", "n0")
	h.confirm(held)
	h.acked(ackAbandoned, h.deliver(held, "q", "n1", false))
	ackedOK(h, held, "q", true)
	a1, b1, a2, b2 := h.publishOn("sac", "n0", "n0/1"), h.publishOn("sac", "n1", "n1/1"), h.publishOn("sac", "n0", "n0/1"), h.publishOn("sac", "n1", "n1/1")
	for _, id := range []uint64{a1, b1, a2, b2} {
		h.confirm(id)
	}
	ackedOK(h, b1, "sac", false)
	h.acked(ackFailed, h.deliver(a1, "sac", "n0", false))
	ackedOK(h, b2, "sac", false)
	ackedOK(h, a2, "sac", false)
	ackedOK(h, a1, "sac", true) // back after later ones: exempt
	return h
}

// TestCheckPassesWorkloadsHistory: a history in which every workload ran
// without a defect passes, and the verdict counts what was exercised.
func TestCheckPassesWorkloadsHistory(t *testing.T) {
	v := workloadsHistory().check()
	f := facts{Faults: []faultOutcome{{What: "kill warren-0"}, {What: "pause warren-1"}}, MinFaults: 2, Nodes: 3}
	f.apply(&v)
	if !v.ok() || exitStatus(v) != 0 {
		t.Fatalf("a clean history judged failed:\n%s", v)
	}
	want := exercised{Abandoned: 1, AbandonedBack: 1, Large: 1, Ordered: 4, OrderExempt: 1, FaultsApplied: 2, MinFaults: 2}
	if v.Exercised != want {
		t.Errorf("exercised %+v, want %+v", v.Exercised, want)
	}
	if len(v.byQueueLines()) != 0 {
		t.Errorf("defects by queue in a clean history: %q", v.byQueueLines())
	}
}

// TestCheckReportsEachDefectByQueue: each defect, added alone to a clean
// history, is reported under its own name, with its story, and counted
// against its queue.
func TestCheckReportsEachDefectByQueue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue string
		add   func(h *history) uint64
		found func(v verdict) []uint64
		count func(d queueDefects) int
	}{
		{"lost: held by a consumer that dropped its connection, never back", "q", func(h *history) uint64 {
			id := h.publish("q", "n0")
			h.confirm(id)
			h.acked(ackAbandoned, h.deliver(id, "q", "n1", false))
			return id
		}, func(v verdict) []uint64 { return v.Lost }, func(d queueDefects) int { return d.Lost }},
		{"unexpected: delivered, never published", "q", func(h *history) uint64 {
			ackedOK(h, 1000, "q", false)
			return 1000
		}, func(v verdict) []uint64 { return v.Unexpected }, func(d queueDefects) int { return d.Unexpected }},
		{"duplicated: an acked message back, flagged", "q", func(h *history) uint64 {
			id := h.publish("q", "n0")
			h.confirm(id)
			ackedOK(h, id, "q", false)
			ackedOK(h, id, "q", true)
			return id
		}, func(v verdict) []uint64 { return v.Duplicated }, func(d queueDefects) int { return d.Duplicated }},
		{"unflagged: a dropped consumer's message back without the flag", "q", func(h *history) uint64 {
			id := h.publish("q", "n0")
			h.confirm(id)
			h.acked(ackAbandoned, h.deliver(id, "q", "n1", false))
			ackedOK(h, id, "q", false)
			return id
		}, func(v verdict) []uint64 { return v.Unflagged }, func(d queueDefects) int { return d.Unflagged }},
		{"misrouted: delivered from another queue", "q", func(h *history) uint64 {
			id := h.publish("q", "n0")
			h.confirm(id)
			ackedOK(h, id, "other", false)
			return id
		}, func(v verdict) []uint64 { return v.Misrouted }, func(d queueDefects) int { return d.Misrouted }},
		{"corrupted: a multi-frame body not as published", "large", func(h *history) uint64 {
			id := h.publishOn("large", "n0", "n0/1")
			h.sized(id, 30000)
			h.confirm(id)
			h.acked(ackOK, h.deliverChecked(id, "large", "n1", false, "the body's SHA-256 is 00, its header says ff"))
			return id
		}, func(v verdict) []uint64 { return v.Corrupted }, func(d queueDefects) int { return d.Corrupted }},
		{"reordered: first delivered after a later publish of its channel", "sac", func(h *history) uint64 {
			early, late := h.publishOn("sac", "n0", "n0/7"), h.publishOn("sac", "n0", "n0/7")
			h.confirm(early)
			h.confirm(late)
			ackedOK(h, late, "sac", false)
			ackedOK(h, early, "sac", false)
			return early
		}, func(v verdict) []uint64 { return v.Reordered }, func(d queueDefects) int { return d.Reordered }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := workloadsHistory()
			id := tc.add(h)
			v := h.check()
			if got := tc.found(v); !slices.Equal(got, []uint64{id}) {
				t.Errorf("reported %v, want [%d]:\n%s", got, id, v)
			}
			if v.ok() || exitStatus(v) != 1 {
				t.Errorf("judged ok %v, exit status %d; want a failed run, 1", v.ok(), exitStatus(v))
			}
			if d := v.ByQueue[tc.queue]; d == nil || tc.count(*d) != 1 {
				t.Errorf("by queue %v: %q", v.ByQueue[tc.queue], v.byQueueLines())
			}
			if !strings.Contains(v.String(), "defects by queue:\n  "+tc.queue+": ") {
				t.Errorf("the verdict does not name the queue:\n%s", v)
			}
			if !slices.ContainsFunc(v.Stories, func(s string) bool { return strings.HasPrefix(s, strconv.FormatUint(id, 10)+":") }) {
				t.Errorf("no story of %d in %q", id, v.Stories)
			}
		})
	}
}

// TestCheckOrderExemptions: the order check judges only first, unflagged
// deliveries, on queues that promise order, within a publishing channel.
func TestCheckOrderExemptions(t *testing.T) {
	h := workloadsHistory()
	// A message first delivered flagged, after later ones of its channel.
	early, late := h.publishOn("sac", "n0", "n0/2"), h.publishOn("sac", "n0", "n0/2")
	ackedOK(h, late, "sac", false)
	ackedOK(h, early, "sac", true)
	// The same on a queue that promises no order.
	early, late = h.publishOn("q", "n0", "n0/2"), h.publishOn("q", "n0", "n0/2")
	ackedOK(h, late, "q", false)
	ackedOK(h, early, "q", false)
	if v := h.check(); !v.ok() || len(v.Reordered) != 0 {
		t.Errorf("judged reordered:\n%s", v)
	}
}

// TestCheckStrandedByQueue: messages left unacknowledged in a queue
// without consumers fail the run, counted against their queue.
func TestCheckStrandedByQueue(t *testing.T) {
	v := workloadsHistory().check()
	facts{StrandedByQueue: map[string]int{"jepsen-1": 2, "jepsen-2": 1}, Nodes: 3}.apply(&v)
	if v.Stranded != 3 || v.ok() || exitStatus(v) != 1 {
		t.Errorf("stranded %d, ok %v, exit %d; want 3, a failed run, 1", v.Stranded, v.ok(), exitStatus(v))
	}
	if got := v.byQueueLines(); !slices.Equal(got, []string{"jepsen-1: stranded 2", "jepsen-2: stranded 1"}) {
		t.Errorf("by queue %q", got)
	}
}

// TestCheckFailsWhatTheRunDidNotObserve: a run that could not look (a
// listing that failed, a drain that timed out), did not break the cluster
// as asked (a fault not applied, fewer faults than --min-faults) or whose
// workload left no trace fails, without a defect (exit 2), and says what.
func TestCheckFailsWhatTheRunDidNotObserve(t *testing.T) {
	for _, tc := range []struct {
		name  string
		facts facts
		alter func(h *history)
		want  string
	}{
		{"listing failed", facts{ListingError: "warrenctl list queues: exit status 1"}, nil,
			"could not observe the stranded messages: warrenctl list queues: exit status 1"},
		{"drain timed out", facts{DrainError: "the queues were not drained within 2m0s"}, nil,
			"could not observe every message: the queues were not drained within 2m0s"},
		{"a fault not applied", facts{Faults: []faultOutcome{{What: "kill warren-0"}, {What: "alarm warren-2", Error: "exit status 1"}}, MinFaults: 1}, nil,
			"could not observe the fault alarm warren-2, asked for and not applied: exit status 1"},
		{"too few faults", facts{Faults: []faultOutcome{{What: "kill warren-0"}}, MinFaults: 3}, nil,
			"could not observe enough faults: 1 applied, at least 3 wanted (--min-faults)"},
		{"no multi-frame message delivered", facts{}, func(h *history) {
			for _, r := range h.msgs {
				r.bytes = 0
			}
		}, "could not observe multi-frame bodies: none was delivered intact"},
		{"no consumer dropped holding a message", facts{}, func(h *history) {
			for _, r := range h.msgs {
				for i := range r.deliveries {
					if r.deliveries[i].ack == ackAbandoned {
						r.deliveries[i].ack = ackFailed
					}
				}
			}
		}, "could not observe consumers dropping their connection: none held a message when it did"},
		{"no first delivery on the ordered queues", facts{}, func(h *history) { h.expect.Ordered = []string{"idle"} },
			"could not observe the order of the single active consumer queues: no first delivery from them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := workloadsHistory()
			if tc.alter != nil {
				tc.alter(h)
			}
			v := h.check()
			tc.facts.apply(&v)
			if v.ok() || v.defective() || exitStatus(v) != 2 {
				t.Errorf("ok %v, defective %v, exit status %d; want a failed run without a defect, 2", v.ok(), v.defective(), exitStatus(v))
			}
			if !strings.Contains(v.String(), tc.want) {
				t.Errorf("the verdict does not say %q:\n%s", tc.want, v)
			}
		})
	}
}

// TestDefaultMinFaults: --min-faults by default asks for the faults a run
// applies even when every round is as long as it can be.
func TestDefaultMinFaults(t *testing.T) {
	for _, tc := range []struct {
		duration, hold time.Duration
		kinds, want    int
	}{
		{time.Minute, 8 * time.Second, 5, 1},
		{2 * time.Minute, 8 * time.Second, 5, 3},
		{10 * time.Minute, 8 * time.Second, 1, 18},
		{10 * time.Second, 8 * time.Second, 2, 1},
		{time.Minute, 8 * time.Second, 0, 0},
	} {
		if got := defaultMinFaults(tc.duration, tc.hold, tc.kinds); got != tc.want {
			t.Errorf("defaultMinFaults(%s, %s, %d) = %d, want %d", tc.duration, tc.hold, tc.kinds, got, tc.want)
		}
	}
}

// TestCheckWorkloadsAgainOffline: the new record kinds (publishing
// channels, body lengths, delivery order, corrupt content, abandoned
// deliveries, the workloads expected, the faults tried) survive the
// history file, and `jepsen check` reaches the same verdict.
func TestCheckWorkloadsAgainOffline(t *testing.T) {
	h := workloadsHistory()
	bad := h.publishOn("large", "n0", "n0/1")
	h.sized(bad, 12345)
	h.acked(ackOK, h.deliverChecked(bad, "large", "n1", false, "header jepsen-int8 missing"))
	early, late := h.publishOn("sac", "n2", "n2/3"), h.publishOn("sac", "n2", "n2/3")
	ackedOK(h, late, "sac", false)
	ackedOK(h, early, "sac", false)
	f := facts{StrandedByQueue: map[string]int{"q": 1}, Faults: []faultOutcome{{What: "kill warren-0"}, {What: "stop warren-1", Error: "boom"}},
		MinFaults: 3, DrainError: "not drained", ListingError: "no listing", Nodes: 3}
	v := h.check()
	f.apply(&v)
	if len(v.Corrupted) != 1 || len(v.Reordered) != 1 || v.Stranded != 1 || len(v.Unobserved) != 4 {
		t.Fatalf("the history to write does not show its defects:\n%s", v)
	}
	dir := t.TempDir()
	if err := writeHistoryFile(filepath.Join(dir, historyFile), h, f); err != nil {
		t.Fatal(err)
	}
	again, err := checkRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.String() != v.String() {
		t.Errorf("offline verdict differs:\n%s\nwant:\n%s", again, v)
	}
	var out, errOut bytes.Buffer
	if st := checkExit([]string{dir}, &out, &errOut); st != 1 {
		t.Errorf("jepsen check: status %d, want 1\n%s", st, out.String())
	}
}

// delivered is what a consumer gets for a publishing, as the client reads
// it (timestamps in the local zone).
func delivered(p amqp091.Publishing) amqp091.Delivery {
	headers := amqp091.Table{}
	for k, v := range p.Headers {
		if t, ok := v.(time.Time); ok {
			v = t.Local()
		}
		headers[k] = v
	}
	headers["x-delivery-count"] = int64(1) // the broker's own
	return amqp091.Delivery{Headers: headers, ContentType: p.ContentType, Type: p.Type, MessageId: p.MessageId, Body: slices.Clone(p.Body)}
}

// TestInspectLarge: a multi-frame message arrives intact as published, and
// any change to its body, a header's value or field type, or its
// properties is found and said.
func TestInspectLarge(t *testing.T) {
	p, n := largePublishing(42)
	if n != len(p.Body) || n < largeMin || n > largeMax || n <= 2*frameMax {
		t.Fatalf("body of %d bytes (recorded %d): want %d to %d, several frames of %d", len(p.Body), n, largeMin, largeMax, frameMax)
	}
	if id, corrupt := inspectLarge(delivered(p)); id != 42 || corrupt != "" {
		t.Fatalf("intact message: id %d, corrupt %q", id, corrupt)
	}
	for _, tc := range []struct {
		name   string
		change func(d *amqp091.Delivery)
		want   string
	}{
		{"a flipped byte", func(d *amqp091.Delivery) { d.Body[len(d.Body)/2] ^= 1 }, "SHA-256"},
		{"a truncated body, checksum to match", func(d *amqp091.Delivery) {
			d.Body = d.Body[:len(d.Body)-frameMax]
			d.Headers[largeHeaderPrefix+"sha256"] = largeHeaders(0, d.Body)[largeHeaderPrefix+"sha256"]
		}, "differing from byte"},
		{"a header of another type", func(d *amqp091.Delivery) { d.Headers[largeHeaderPrefix+"uint16"] = int16(42) }, "header jepsen-uint16 is"},
		{"a nested header changed", func(d *amqp091.Delivery) {
			d.Headers[largeHeaderPrefix+"table"] = amqp091.Table{"id": int64(42), "nested": amqp091.Table{"void": nil}}
		}, "header jepsen-table is"},
		{"a header missing", func(d *amqp091.Delivery) { delete(d.Headers, largeHeaderPrefix+"decimal") }, "header jepsen-decimal missing"},
		{"a header never published", func(d *amqp091.Delivery) { d.Headers[largeHeaderPrefix+"extra"] = "x" }, "header jepsen-extra never published"},
		{"a property changed", func(d *amqp091.Delivery) { d.ContentType = "text/plain" }, `content-type "text/plain"`},
		{"no ID line", func(d *amqp091.Delivery) { d.Body = []byte("garbage") }, "without its ID line"},
	} {
		d := delivered(p)
		tc.change(&d)
		if _, corrupt := inspectLarge(d); !strings.Contains(corrupt, tc.want) {
			t.Errorf("%s: corrupt %q, want it to say %q", tc.name, corrupt, tc.want)
		}
	}
}

// acker stands for a delivery whose ack the client writes without error.
type acker struct{}

func (acker) Ack(bool) error { return nil }

// TestCheckDuplicateNeedsTheAckProvedFirst: a message taken again after
// the round trip that showed the broker had read its ack is a duplicate;
// taken again, flagged, between the ack and that round trip, it is a
// redelivery (the broker may have sent it before it read the ack), and
// the verdict survives the history file.
func TestCheckDuplicateNeedsTheAckProvedFirst(t *testing.T) {
	for _, tc := range []struct {
		name            string
		proveFirst      bool
		wantDuplicated  bool
		wantRedelivered int
	}{
		{"taken again after the proof", true, true, 2},
		{"taken again before the proof", false, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanHistory()
			id := h.publish("q", "n0")
			h.confirm(id)
			a := acks{h: h}
			if err := a.ack(acker{}, h.deliver(id, "q", "n1", false)); err != nil {
				t.Fatal(err)
			}
			if tc.proveFirst {
				a.roundTrip()
			}
			h.acked(ackFailed, h.deliver(id, "q", "n1", true))
			if !tc.proveFirst {
				a.roundTrip()
			}
			dir := t.TempDir()
			if err := writeHistoryFile(filepath.Join(dir, historyFile), h, facts{}); err != nil {
				t.Fatal(err)
			}
			again, err := checkRun(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []verdict{h.check(), again} {
				if got := slices.Contains(v.Duplicated, id); got != tc.wantDuplicated || v.Redelivered != tc.wantRedelivered {
					t.Errorf("duplicated %v (want %v), redelivered %d (want %d):\n%s", got, tc.wantDuplicated, v.Redelivered, tc.wantRedelivered, v)
				}
			}
		})
	}
}
