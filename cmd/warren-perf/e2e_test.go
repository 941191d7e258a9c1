package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster/node/nodetest"
)

// The end-to-end tests run against a one-node Warren started in the test process, or
// against the broker WARREN_PERF_TEST_URI names, e.g. a RabbitMQ:
//
//	WARREN_PERF_TEST_URI=amqp://guest:guest@127.0.0.1:5772/ go test -race ./cmd/warren-perf/
//
// They declare uniquely named queues and delete them afterwards.
func brokerURI(t *testing.T) string {
	t.Helper()
	if uri := os.Getenv("WARREN_PERF_TEST_URI"); uri != "" {
		return uri
	}
	node := nodetest.StartCluster(t, 1)[0]
	return fmt.Sprintf("amqp://guest:guest@%s/", node.AMQPAddr())
}

func runForTest(t *testing.T, ctx context.Context, args ...string) (*Summary, string) {
	t.Helper()
	cfg, err := parseConfig(args, io.Discard)
	if err != nil {
		t.Fatalf("parseConfig(%q): %v", args, err)
	}
	var out, errOut strings.Builder
	s, err := run(ctx, cfg, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	t.Logf("stdout:\n%s", out.String())
	return s, out.String()
}

func testQueue(t *testing.T) string {
	return fmt.Sprintf("warren-perf-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
}

// Everything sent is confirmed and received, and every delivery produced a latency sample.
func checkComplete(t *testing.T, s *Summary) {
	t.Helper()
	if s.Sent == 0 {
		t.Fatal("nothing sent")
	}
	if s.Confirm > 0 && (s.Confirmed != s.Sent || s.LatencyConfirm.Count != uint64(s.Confirmed)) {
		t.Errorf("sent %d, confirmed %d, confirm samples %d", s.Sent, s.Confirmed, s.LatencyConfirm.Count)
	}
	if s.Nacked != 0 || s.Returned != 0 || s.Stale != 0 {
		t.Errorf("nacked %d returned %d stale %d", s.Nacked, s.Returned, s.Stale)
	}
	if s.Received != s.Sent || s.LatencyE2E.Count != uint64(s.Received) {
		t.Errorf("sent %d, received %d, e2e samples %d", s.Sent, s.Received, s.LatencyE2E.Count)
	}
	if s.LatencyE2E.P50 <= 0 || s.LatencyE2E.Max < s.LatencyE2E.P99 {
		t.Errorf("implausible e2e latency %+v", s.LatencyE2E)
	}
}

func TestEndToEnd(t *testing.T) {
	uri := brokerURI(t)
	for _, tc := range []struct{ queueType, batch string }{
		{"classic", "true"}, {"quorum", "true"}, {"quorum", "false"},
	} {
		t.Run(tc.queueType+"/batch-writes="+tc.batch, func(t *testing.T) {
			s, out := runForTest(t, context.Background(), "--uri", uri, "--queue", testQueue(t),
				"--queue-type", tc.queueType, "--queues", "2", "--producers", "2", "--consumers", "2",
				"--confirm", "50", "--duration", "2s", "--batch-writes="+tc.batch, "--delete")
			checkComplete(t, s)
			if !strings.Contains(out, "time ") || !strings.Contains(out, "\n{\"summary\":{") {
				t.Errorf("missing progress or summary line")
			}
		})
	}
}

// Bodies under 8 bytes carry the timestamp in a header; --messages, --rate and --multi-ack.
func TestEndToEndSmallRateMultiAck(t *testing.T) {
	uri := brokerURI(t)
	start := time.Now()
	s, _ := runForTest(t, context.Background(), "--uri", uri, "--queue", testQueue(t),
		"--size", "4", "--messages", "300", "--rate", "1000", "--producers", "2",
		"--prefetch", "20", "--multi-ack", "10", "--confirm", "5", "--json-only", "--delete")
	checkComplete(t, s)
	if s.Sent != 600 {
		t.Errorf("sent %d, want 600 (2 producers × 300)", s.Sent)
	}
	// 600 messages at 1000/s take ≥ 0.5s (minus the 10ms burst allowance).
	if el := time.Since(start); el < 550*time.Millisecond {
		t.Errorf("rate limit not applied: 600 msgs in %v", el)
	}
}

// Cancelling the context (Ctrl-C) ends the run early with a summary and no error.
func TestEndToEndInterrupt(t *testing.T) {
	uri := brokerURI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	s, _ := runForTest(t, ctx, "--uri", uri, "--queue", testQueue(t), "--confirm", "20",
		"--auto-ack", "--duration", "1m", "--json-only", "--delete")
	if !s.Interrupted || s.Sent == 0 {
		t.Errorf("interrupted %v, sent %d", s.Interrupted, s.Sent)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("interrupt took %v", el)
	}
}

// A refused connection is a clear setup error, not a hang or a zero summary. Needs no broker:
// nothing listens on loopback port 1.
func TestConnectionRefused(t *testing.T) {
	cfg := mustParse(t, "--uri", "amqp://guest:secret@127.0.0.1:1/", "--duration", "1s")
	var out strings.Builder
	s, err := run(context.Background(), cfg, &out, io.Discard)
	if err == nil || s != nil {
		t.Fatalf("run succeeded against a closed port: %v", s)
	}
	if msg := err.Error(); !strings.Contains(msg, "cannot connect to amqp://guest:***@127.0.0.1:1/") ||
		strings.Contains(msg, "secret") {
		t.Errorf("unclear error: %v", err)
	}
}
