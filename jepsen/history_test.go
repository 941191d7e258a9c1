package main

import (
	"strings"
	"testing"
	"time"
)

// TestCheckJudgesHistories: the checker's verdict on small histories,
// one kind of story each.
func TestCheckJudgesHistories(t *testing.T) {
	h := newHistory([]string{"expiring"})
	delivered := h.publish("q", "n0") // confirmed, delivered once
	h.confirm(delivered)
	h.deliver(delivered, "n1", false)
	lost := h.publish("q", "n0") // confirmed, never delivered
	h.confirm(lost)
	repeated := h.publish("q", "n0") // delivered twice, the second unflagged
	h.confirm(repeated)
	h.deliver(repeated, "n1", false)
	h.deliver(repeated, "n2", false)
	flagged := h.publish("q", "n0") // delivered twice, the second flagged
	h.confirm(flagged)
	h.deliver(flagged, "n1", false)
	h.deliver(flagged, "n2", true)
	h.publish("q", "n0")                  // neither confirmed nor delivered
	copied := h.publish("expiring", "n0") // dead-lettered twice
	h.confirm(copied)
	awaiting := h.publish("expiring", "n0") // delivered once
	h.confirm(awaiting)
	if n := h.awaitingDeadLetters(); n != 2 {
		t.Errorf("awaiting dead letters: %d, want 2", n)
	}
	h.deliver(copied, "n1", false)
	h.deliver(copied, "n2", false)
	h.deliver(awaiting, "n1", false)
	if n := h.awaitingDeadLetters(); n != 0 {
		t.Errorf("awaiting dead letters once delivered: %d, want 0", n)
	}
	h.deliver(1000, "n1", false) // never published

	v := h.check()
	if v.Attempted != 7 || v.Confirmed != 6 || v.Indeterminate != 1 {
		t.Errorf("attempted %d confirmed %d indeterminate %d; want 7, 6, 1", v.Attempted, v.Confirmed, v.Indeterminate)
	}
	if len(v.Lost) != 1 || v.Lost[0] != lost {
		t.Errorf("lost %v, want [%d]", v.Lost, lost)
	}
	if len(v.Unflagged) != 1 || v.Unflagged[0] != repeated {
		t.Errorf("unflagged %v, want [%d]", v.Unflagged, repeated)
	}
	if len(v.Unexpected) != 1 || v.Unexpected[0] != 1000 {
		t.Errorf("unexpected %v, want [1000]", v.Unexpected)
	}
	if v.Redelivered != 1 {
		t.Errorf("redelivered (flagged) %d, want 1", v.Redelivered)
	}
	if v.DeadLettered != 2 || v.DeadLetterCopies != 1 {
		t.Errorf("dead-lettered %d with %d copies; want 2 and 1", v.DeadLettered, v.DeadLetterCopies)
	}
	if v.ok() {
		t.Error("a history with a lost message judged correct")
	}

	clean := verdict{Confirmed: 1}
	if !clean.ok() {
		t.Error("a clean verdict judged defective")
	}
	clean.RefusedAfterHeal = 1
	if clean.ok() {
		t.Error("a publish refused after healing judged correct")
	}
}

// TestCheckSummarisesConfirmWaits: the verdict tells how long confirms
// took and which publish waited longest, so that a queue leaderless for
// half a minute shows in the report and not only in the logs.
func TestCheckSummarisesConfirmWaits(t *testing.T) {
	h := newHistory(nil)
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for i, wait := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 31 * time.Second, 12 * time.Second} {
		id := h.publish("q", "n0")
		h.msgs[id].published = start.Add(time.Duration(i) * time.Second)
		h.msgs[id].confirmed = h.msgs[id].published.Add(wait)
		h.deliver(id, "n1", false)
	}
	h.publish("q", "n0") // unconfirmed: no wait
	w := h.check().ConfirmWait
	if w.P50 != 0.003 || w.Max != 31 || w.Over10s != 2 {
		t.Errorf("waits %+v; want p50 0.003 s, max 31 s, 2 over 10 s", w)
	}
	if !strings.Contains(w.Slowest, "published to q via n0 at 12:00:03.000; confirmed at 12:00:34.000") {
		t.Errorf("slowest: %q", w.Slowest)
	}
}
