package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/cmd/warren-perf/internal/hist"
)

func TestFmtNanos(t *testing.T) {
	cases := map[int64]string{
		0: "0ns", 850: "850ns", 1_000: "1.00µs", 12_345: "12.3µs", 999_499: "999µs",
		4_560_000: "4.56ms", 120_000_000: "120ms", 1_234_000_000: "1.23s", 75e9: "75.0s",
	}
	for ns, want := range cases {
		if got := fmtNanos(ns); got != want {
			t.Errorf("fmtNanos(%d) = %q, want %q", ns, got, want)
		}
	}
}

func TestSummaryJSONLine(t *testing.T) {
	cfg := mustParse(t, "--uri", "amqp://u:secret@127.0.0.1:5672/", "--confirm", "10")
	h := hist.New()
	for i := int64(1); i <= 1000; i++ {
		h.Record(i * 1000) // 1µs .. 1ms
	}
	var lat hist.Snapshot
	h.AddTo(&lat)
	start := time.Now()
	startNs := epochWall + int64(start.Sub(epochMono))
	tot := totals{sent: 1000, confirmed: 1000, received: 500,
		lastConfirm: startNs + 2e9, lastReceived: startNs + 1e9}
	s := buildSummary(cfg, tot, &lat, &lat, phaseTimes{start: start, publishEnd: start.Add(2 * time.Second)})

	var out strings.Builder
	if err := printJSON(&out, s); err != nil {
		t.Fatal(err)
	}
	line := out.String()
	if !strings.HasPrefix(line, `{"summary":{`) || strings.Count(line, "\n") != 1 {
		t.Fatalf("not a single greppable line: %q", line)
	}
	if strings.Contains(line, "secret") {
		t.Fatal("password leaked into the summary")
	}
	var parsed struct {
		Summary map[string]any `json:"summary"`
	}
	if err := json.Unmarshal([]byte(line), &parsed); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"uris", "producers", "consumers", "size", "confirm", "prefetch", "queues",
		"queue_type", "duration_s", "sent", "confirmed", "nacked", "returned", "received", "send_rate",
		"confirm_rate", "receive_rate", "latency_e2e_us", "latency_confirm_us"} {
		if _, ok := parsed.Summary[k]; !ok {
			t.Errorf("summary lacks %q", k)
		}
	}
	if s.SendRate != 500 || s.ConfirmRate != 500 || s.ReceiveRate != 500 {
		t.Errorf("rates send %v confirm %v receive %v, want 500 each", s.SendRate, s.ConfirmRate, s.ReceiveRate)
	}
	p := s.LatencyE2E
	if p.Count != 1000 || p.Min != 1 || p.Max != 1000 || p.P50 < 495 || p.P50 > 505 || p.P999 < 990 {
		t.Errorf("percentiles %+v", p)
	}
}

func TestProgressLine(t *testing.T) {
	ps := []*producerStats{newProducerStats()}
	cs := []*consumerStats{newConsumerStats()}
	start := time.Now()
	var out strings.Builder
	pr := newProgress(&out, ps, cs, start)

	ps[0].sent.Store(2000)
	ps[0].confirmed.Store(1000)
	cs[0].received.Store(500)
	ps[0].confirmLatency.Record(2_000_000)
	line := pr.line(start.Add(2 * time.Second))
	for _, want := range []string{"time    2.0s", "sent    1000 msg/s", "confirmed     500 msg/s",
		"received     250 msg/s", "confirm p50/p99 2.00ms/2.00ms", "e2e p50/p99 -/-"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	// The next second only reports what happened in it.
	ps[0].confirmLatency.Record(7_000_000)
	line = pr.line(start.Add(3 * time.Second))
	if !strings.Contains(line, "sent       0 msg/s") || !strings.Contains(line, "confirm p50/p99 7.00ms/7.00ms") {
		t.Errorf("second line %q", line)
	}
	if out.Len() != 0 {
		t.Error("line must not print; only loop does")
	}
}
