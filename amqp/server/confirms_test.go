package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/warrenmq/warren/amqp/wire"
)

// frames renders confirm frames as "ack 3", "ack 5+" (multiple), "nack 4".
func frames(items []outItem) string {
	var out []string
	for _, it := range items {
		switch m := it.method.(type) {
		case *wire.BasicAck:
			out = append(out, fmt.Sprintf("ack %d%s", m.DeliveryTag, plus(m.Multiple)))
		case *wire.BasicNack:
			out = append(out, fmt.Sprintf("nack %d%s", m.DeliveryTag, plus(m.Multiple)))
		}
	}
	return strings.Join(out, ", ")
}

func plus(multiple bool) string {
	if multiple {
		return "+"
	}
	return ""
}

// A publish completed while an earlier one waits is confirmed on its own
// at once, as RabbitMQ's channel confirms it; once the head completes,
// what it releases goes in runs, and a tag confirmed ahead is not
// confirmed twice on its own.
func TestConfirmsOutOfSequence(t *testing.T) {
	var tr confirmTracker
	var stats counters
	for range 6 {
		tr.publish(1)
	}
	flush := func() string {
		return frames(tr.appendConfirms(nil, 1, &stats))
	}
	steps := []struct {
		complete []int // sequence numbers, negative for a refusal
		want     string
		waiting  int
	}{
		{[]int{3}, "ack 3", 5},
		{[]int{-4}, "nack 4", 4},
		{[]int{6}, "ack 6", 3},
		{[]int{1, 2}, "ack 2+", 1},
		{[]int{5}, "ack 5", 0},
	}
	for _, s := range steps {
		queued := false
		for _, seq := range s.complete {
			ok := seq > 0
			queued = tr.complete(uint64(max(seq, -seq)), ok) || queued
		}
		if !queued {
			t.Fatalf("completing %v did not queue the channel", s.complete)
		}
		if got := flush(); got != s.want {
			t.Errorf("after %v: %q, want %q", s.complete, got, s.want)
		}
		if got := tr.unconfirmed(); got != s.waiting {
			t.Errorf("after %v: %d unconfirmed, want %d", s.complete, got, s.waiting)
		}
	}
	if got := stats[cConfirmed].Load(); got != 5 {
		t.Errorf("%d confirmed counted, want 5 (one nack)", got)
	}
	if len(tr.pending) != 0 || tr.ahead != 0 {
		t.Errorf("left %d pending, %d ahead", len(tr.pending), tr.ahead)
	}

	// In sequence, nothing changes: runs of acks and nacks, one frame each.
	for range 5 {
		tr.publish(2) // two queues each
	}
	for _, seq := range []uint64{7, 8, 9, 10, 11} {
		tr.complete(seq, true)
		tr.complete(seq, seq != 9)
	}
	if got := flush(); got != "ack 8+, nack 9, ack 11+" {
		t.Errorf("in sequence: %q", got)
	}
}

// BenchmarkConfirmsInSequence: a window of 256 publishes to one queue, each
// stored in order and flushed as it completes, as a publisher with confirms
// at full speed keeps its channel.
func BenchmarkConfirmsInSequence(b *testing.B) {
	var tr confirmTracker
	var stats counters
	const window = 256
	for range window {
		tr.publish(1)
	}
	items := make([]outItem, 0, 4)
	seq := uint64(1)
	b.ReportAllocs()
	for b.Loop() {
		tr.complete(seq, true)
		items = tr.appendConfirms(items[:0], 1, &stats)
		tr.publish(1)
		seq++
	}
}
