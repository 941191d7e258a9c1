package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/warrenmq/warren/cmd/warren-perf/internal/hist"
)

// progress prints one line per second from counter and histogram deltas. It runs on its own
// goroutine and only reads the workers' atomics, so it never slows them down.
type progress struct {
	out   io.Writer
	ps    []*producerStats
	cs    []*consumerStats
	start time.Time

	prevTime time.Time
	prev     totals
	// Cumulative confirm/e2e histograms at the previous tick, and scratch space for the
	// current one: the difference is "the latest second".
	prevConfirm, curConfirm, prevE2E, curE2E, delta *hist.Snapshot
}

func newProgress(out io.Writer, ps []*producerStats, cs []*consumerStats, start time.Time) *progress {
	return &progress{
		out: out, ps: ps, cs: cs, start: start, prevTime: start,
		prevConfirm: new(hist.Snapshot), curConfirm: new(hist.Snapshot),
		prevE2E: new(hist.Snapshot), curE2E: new(hist.Snapshot), delta: new(hist.Snapshot),
	}
}

// loop prints a line every second until stop is closed.
func (p *progress) loop(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			fmt.Fprintln(p.out, p.line(now))
		}
	}
}

// line computes the rates since the previous call.
func (p *progress) line(now time.Time) string {
	cur := sumTotals(p.ps, p.cs)
	dt := now.Sub(p.prevTime).Seconds()
	rate := func(n, prev int64) float64 { return float64(n-prev) / dt }

	*p.curConfirm = hist.Snapshot{}
	confirmSnapshot(p.ps, p.curConfirm)
	p.delta.Delta(p.curConfirm, p.prevConfirm)
	confirm := fmt.Sprintf("%s/%s", fmtLatency(p.delta, 0.5), fmtLatency(p.delta, 0.99))

	*p.curE2E = hist.Snapshot{}
	e2eSnapshot(p.cs, p.curE2E)
	p.delta.Delta(p.curE2E, p.prevE2E)
	e2e := fmt.Sprintf("%s/%s", fmtLatency(p.delta, 0.5), fmtLatency(p.delta, 0.99))

	s := fmt.Sprintf("time %6.1fs | sent %7.0f msg/s | confirmed %7.0f msg/s | nacked %d | received %7.0f msg/s | confirm p50/p99 %s | e2e p50/p99 %s",
		now.Sub(p.start).Seconds(), rate(cur.sent, p.prev.sent), rate(cur.confirmed, p.prev.confirmed),
		cur.nacked-p.prev.nacked, rate(cur.received, p.prev.received), confirm, e2e)

	p.prev, p.prevTime = cur, now
	p.prevConfirm, p.curConfirm = p.curConfirm, p.prevConfirm
	p.prevE2E, p.curE2E = p.curE2E, p.prevE2E
	return s
}

// fmtLatency formats quantile q of s (nanoseconds) for humans, "-" when there are no samples.
func fmtLatency(s *hist.Snapshot, q float64) string {
	if s.Total == 0 {
		return "-"
	}
	return fmtNanos(s.Quantile(q))
}

// fmtNanos prints 3 significant digits in the natural unit: 850ns, 12.3µs, 4.56ms, 1.23s.
func fmtNanos(ns int64) string {
	d := float64(ns)
	switch {
	case ns < 1e3:
		return fmt.Sprintf("%dns", ns)
	case ns < 1e6:
		return sig3(d/1e3) + "µs"
	case ns < 1e9:
		return sig3(d/1e6) + "ms"
	default:
		return sig3(d/1e9) + "s"
	}
}

func sig3(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// Summary is the result of a run; it is printed as the final JSON line.
type Summary struct {
	URIs           []string    `json:"uris"`
	ConsumerURIs   []string    `json:"consumer_uris,omitempty"`
	Producers      int         `json:"producers"`
	Consumers      int         `json:"consumers"`
	Size           int         `json:"size"`
	Confirm        int         `json:"confirm"`
	Prefetch       int         `json:"prefetch"`
	AutoAck        bool        `json:"auto_ack"`
	MultiAck       int         `json:"multi_ack"`
	BatchWrites    bool        `json:"batch_writes"`
	Queues         int         `json:"queues"`
	QueueType      string      `json:"queue_type"`
	RateLimit      float64     `json:"rate_limit"`
	DurationS      float64     `json:"duration_s"`
	Sent           int64       `json:"sent"`
	Confirmed      int64       `json:"confirmed"`
	Nacked         int64       `json:"nacked"`
	Returned       int64       `json:"returned"`
	Received       int64       `json:"received"`
	Stale          int64       `json:"stale"`
	SendRate       float64     `json:"send_rate"`
	ConfirmRate    float64     `json:"confirm_rate"`
	ReceiveRate    float64     `json:"receive_rate"`
	LatencyE2E     Percentiles `json:"latency_e2e_us"`
	LatencyConfirm Percentiles `json:"latency_confirm_us"`
	Interrupted    bool        `json:"interrupted"`
	Error          string      `json:"error,omitempty"`
}

// Percentiles in microseconds (0.1µs resolution); all zero when Count is 0.
type Percentiles struct {
	Count uint64  `json:"count"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P75   float64 `json:"p75"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

func percentiles(s *hist.Snapshot) Percentiles {
	us := func(q float64) float64 { return math.Round(float64(s.Quantile(q))/100) / 10 }
	return Percentiles{
		Count: s.Total, Min: us(0), P50: us(0.5), P75: us(0.75), P95: us(0.95),
		P99: us(0.99), P999: us(0.999), Max: us(1),
	}
}

// phaseTimes are the instants the average rates are computed over.
type phaseTimes struct {
	start      time.Time
	publishEnd time.Time // all producers stopped publishing (or the consumer-only run ended)
}

// buildSummary computes totals and averages. Send rate is over the publishing phase; confirm
// and receive rates run to the last confirm/delivery, so a drain that is still catching up
// after producers stop shows as a lower consumer rate, not as a free bonus.
func buildSummary(cfg *Config, t totals, confirm, e2e *hist.Snapshot, ph phaseTimes) *Summary {
	uris := make([]string, len(cfg.URIs))
	for i, u := range cfg.URIs {
		uris[i] = redactURI(u)
	}
	var consumerURIs []string
	for _, u := range cfg.ConsumerURIs {
		consumerURIs = append(consumerURIs, redactURI(u))
	}
	startNs := epochWall + int64(ph.start.Sub(epochMono))
	over := func(n, lastNs int64) float64 {
		if n == 0 || lastNs <= startNs {
			return 0
		}
		return round1(float64(n) / (float64(lastNs-startNs) / 1e9))
	}
	dur := ph.publishEnd.Sub(ph.start).Seconds()
	s := &Summary{
		URIs: uris, ConsumerURIs: consumerURIs, Producers: cfg.Producers, Consumers: cfg.Consumers, Size: cfg.Size,
		Confirm: cfg.Confirm, Prefetch: cfg.Prefetch, AutoAck: cfg.AutoAck, MultiAck: cfg.MultiAck, BatchWrites: cfg.BatchWrites,
		Queues: cfg.Queues, QueueType: cfg.QueueType, RateLimit: cfg.Rate,
		DurationS: math.Round(dur*1000) / 1000,
		Sent:      t.sent, Confirmed: t.confirmed, Nacked: t.nacked, Returned: t.returned,
		Received: t.received, Stale: t.stale,
		ConfirmRate: over(t.confirmed, t.lastConfirm), ReceiveRate: over(t.received, t.lastReceived),
		LatencyE2E: percentiles(e2e), LatencyConfirm: percentiles(confirm),
	}
	if dur > 0 {
		s.SendRate = round1(float64(t.sent) / dur)
	}
	return s
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// printHuman writes the end-of-run report.
func printHuman(w io.Writer, s *Summary, confirm, e2e *hist.Snapshot) {
	var b strings.Builder
	status := "finished"
	if s.Interrupted {
		status = "interrupted"
	}
	if s.Error != "" {
		status = "failed"
	}
	phase := "publishing"
	if s.Producers == 0 {
		phase = "consuming"
	}
	fmt.Fprintf(&b, "\n--- warren-perf %s: %d producer(s), %d consumer(s), %d queue(s) %s, %d-byte messages, confirm window %d, %s for %.2fs ---\n",
		status, s.Producers, s.Consumers, s.Queues, s.QueueType, s.Size, s.Confirm, phase, s.DurationS)
	fmt.Fprintf(&b, "sent       %10d msgs  %10.0f msg/s\n", s.Sent, s.SendRate)
	fmt.Fprintf(&b, "confirmed  %10d msgs  %10.0f msg/s\n", s.Confirmed, s.ConfirmRate)
	fmt.Fprintf(&b, "nacked     %10d msgs\n", s.Nacked)
	fmt.Fprintf(&b, "returned   %10d msgs\n", s.Returned)
	fmt.Fprintf(&b, "received   %10d msgs  %10.0f msg/s\n", s.Received, s.ReceiveRate)
	if s.Stale > 0 {
		fmt.Fprintf(&b, "stale      %10d msgs  (sent before this run; acked, not counted)\n", s.Stale)
	}
	latencyLine(&b, "end-to-end latency", e2e)
	latencyLine(&b, "confirm latency   ", confirm)
	fmt.Fprint(w, b.String())
}

func latencyLine(b *strings.Builder, name string, s *hist.Snapshot) {
	if s.Total == 0 {
		fmt.Fprintf(b, "%s  no samples\n", name)
		return
	}
	fmt.Fprintf(b, "%s  min %s  p50 %s  p75 %s  p95 %s  p99 %s  p99.9 %s  max %s  (%d samples)\n", name,
		fmtNanos(s.Quantile(0)), fmtNanos(s.Quantile(0.5)), fmtNanos(s.Quantile(0.75)),
		fmtNanos(s.Quantile(0.95)), fmtNanos(s.Quantile(0.99)), fmtNanos(s.Quantile(0.999)),
		fmtNanos(s.Quantile(1)), s.Total)
}

// printJSON writes the single greppable line: {"summary":{...}}.
func printJSON(w io.Writer, s *Summary) error {
	line, err := json.Marshal(struct {
		Summary *Summary `json:"summary"`
	}{s})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}
