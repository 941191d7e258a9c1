package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ackedOK records a delivery of id from queue and an ack the broker read.
func ackedOK(h *history, id uint64, queue string, redelivered bool) {
	h.acked(ackOK, h.deliver(id, queue, "n1", redelivered))
}

// cleanHistory is a history without a defect: a message delivered and
// acked; one whose ack failed, redelivered flagged and acked; one whose
// connection went after its ack, redelivered flagged; one dead-lettered
// twice (a copy, unflagged); one never confirmed nor delivered.
func cleanHistory() *history {
	h := newHistory(map[string]string{"expiring": "dead"})
	once := h.publish("q", "n0")
	h.confirm(once)
	ackedOK(h, once, "q", false)
	retried := h.publish("q", "n0")
	h.confirm(retried)
	h.acked(ackFailed, h.deliver(retried, "q", "n1", false))
	ackedOK(h, retried, "q", true)
	unsure := h.publish("q", "n0")
	h.confirm(unsure)
	h.acked(ackUnconfirmed, h.deliver(unsure, "q", "n1", false))
	ackedOK(h, unsure, "q", true)
	copied := h.publish("expiring", "n0")
	h.confirm(copied)
	ackedOK(h, copied, "dead", false)
	ackedOK(h, copied, "dead", false)
	h.publish("q", "n0")
	return h
}

// TestCheckPassesCleanHistory: a history with redeliveries, failed acks
// and dead-letter copies, but no defect, passes.
func TestCheckPassesCleanHistory(t *testing.T) {
	v := cleanHistory().check()
	if !v.ok() {
		t.Fatalf("a clean history judged failed:\n%s", v)
	}
	if v.Attempted != 5 || v.Confirmed != 4 || v.Indeterminate != 1 || v.Redelivered != 2 || v.DeadLettered != 1 || v.DeadLetterCopies != 1 {
		t.Errorf("counts %+v", v)
	}
	if exitStatus(v) != 0 {
		t.Errorf("exit status %d, want 0", exitStatus(v))
	}
}

// TestCheckReportsEachDefect: each defect, added alone to a clean
// history, is reported under its own name, with its story.
func TestCheckReportsEachDefect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		add   func(h *history) uint64
		found func(v verdict) []uint64
	}{
		{"lost: confirmed, never delivered", func(h *history) uint64 {
			id := h.publish("q", "n0")
			h.confirm(id)
			return id
		}, func(v verdict) []uint64 { return v.Lost }},
		{"lost: delivered, its ack failed, never delivered again", func(h *history) uint64 {
			id := h.publish("q", "n0")
			h.confirm(id)
			h.acked(ackFailed, h.deliver(id, "q", "n1", false))
			return id
		}, func(v verdict) []uint64 { return v.Lost }},
		{"lost: dead-lettered, never delivered from the dead-letter queue", func(h *history) uint64 {
			id := h.publish("expiring", "n0")
			h.confirm(id)
			return id
		}, func(v verdict) []uint64 { return v.Lost }},
		{"unexpected: delivered, never published", func(h *history) uint64 {
			ackedOK(h, 1000, "q", false)
			return 1000
		}, func(v verdict) []uint64 { return v.Unexpected }},
		{"duplicated: delivered again after an ack the broker read", func(h *history) uint64 {
			id := h.publish("q", "n0")
			h.confirm(id)
			ackedOK(h, id, "q", false)
			ackedOK(h, id, "q", true)
			return id
		}, func(v verdict) []uint64 { return v.Duplicated }},
		{"unflagged: an unacked message delivered again without the flag", func(h *history) uint64 {
			id := h.publish("q", "n0")
			h.confirm(id)
			h.acked(ackFailed, h.deliver(id, "q", "n1", false))
			ackedOK(h, id, "q", false)
			return id
		}, func(v verdict) []uint64 { return v.Unflagged }},
		{"misrouted: delivered from another queue", func(h *history) uint64 {
			id := h.publish("q", "n0")
			h.confirm(id)
			ackedOK(h, id, "other", false)
			return id
		}, func(v verdict) []uint64 { return v.Misrouted }},
		{"misrouted: a dead letter from the queue it was published to", func(h *history) uint64 {
			id := h.publish("expiring", "n0")
			h.confirm(id)
			ackedOK(h, id, "expiring", false)
			return id
		}, func(v verdict) []uint64 { return v.Misrouted }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanHistory()
			id := tc.add(h)
			v := h.check()
			if got := tc.found(v); !slices.Equal(got, []uint64{id}) {
				t.Errorf("reported %v, want [%d]:\n%s", got, id, v)
			}
			if v.ok() || exitStatus(v) != 1 {
				t.Errorf("judged ok %v, exit status %d; want a failed run, 1", v.ok(), exitStatus(v))
			}
			if !slices.ContainsFunc(v.Stories, func(s string) bool { return strings.HasPrefix(s, strconv.FormatUint(id, 10)+":") }) {
				t.Errorf("no story of %d in %q", id, v.Stories)
			}
		})
	}
}

// TestCheckFailsWhatItCouldNotObserve: a listing that fails or cannot be
// read, or a drain that did not finish, fails a run that is otherwise
// clean, and the verdict says what could not be observed.
func TestCheckFailsWhatItCouldNotObserve(t *testing.T) {
	for _, listing := range [][]string{
		nil,
		{"NAME MESSAGES READY"},
		{"NAME UNACKED CONSUMERS", "jepsen-0 3"},
		{"NAME UNACKED CONSUMERS", "jepsen-0 many 0"},
	} {
		if _, err := unackedWithoutConsumers(listing); err == nil {
			t.Errorf("listing %q read without an error", listing)
		}
	}
	if n, err := unackedWithoutConsumers([]string{"NAME UNACKED CONSUMERS", "jepsen-0 3 0", "jepsen-1 2 1", "jepsen-2 0 0", ""}); err != nil || !maps.Equal(n, map[string]int{"jepsen-0": 3}) {
		t.Errorf("stranded %v, %v; want jepsen-0: 3", n, err)
	}

	h := cleanHistory()
	h.unobservable("the stranded messages: warrenctl list queues: exit status 1")
	v := h.check()
	if v.ok() || v.defective() || exitStatus(v) != 2 {
		t.Errorf("ok %v, defective %v, exit status %d; want a failed run without a defect, 2", v.ok(), v.defective(), exitStatus(v))
	}
	if !strings.Contains(v.String(), "could not observe the stranded messages: warrenctl list queues") {
		t.Errorf("the verdict does not say what it could not observe:\n%s", v)
	}
}

// TestCheckAgainOffline: the history written as JSON lines, judged again
// by `jepsen check`, gives the same verdict, facts and all.
func TestCheckAgainOffline(t *testing.T) {
	h := cleanHistory()
	lost := h.publish("q", "n0")
	h.confirm(lost)
	h.unobservable("every message: the queues were not drained within 2m0s")
	v := h.check()
	f := facts{Stranded: 2, RefusedAfterHeal: 1, Crashed: []string{"warren-1: exit status 2"}, RPC: &rpcVerdict{Requests: 3, Unanswered: []uint64{7}},
		Upgrade: &upgradeVerdict{Upgraded: 2, Machine: 3}, Nodes: 3}
	f.apply(&v)

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
	if st := checkExit([]string{dir}, &out, &errOut); st != 1 || strings.TrimSpace(out.String()) != v.String() {
		t.Errorf("jepsen check: status %d, output\n%s\nstderr %s", st, out.String(), errOut.String())
	}
	if st := checkExit([]string{filepath.Join(dir, "missing")}, &out, &errOut); st != 2 {
		t.Errorf("jepsen check of a directory without a history: status %d, want 2", st)
	}
	if _, err := os.Stat(filepath.Join(dir, historyFile)); err != nil {
		t.Fatal(err)
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
		ackedOK(h, id, "q", false)
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
