package main

import (
	"slices"
	"testing"
)

// TestRPCCheckJudgesHistories: the RPC checker's verdict on small
// histories, one kind of story each.
func TestRPCCheckJudgesHistories(t *testing.T) {
	h := newRPCHistory()
	kept := h.connected("n0", "amq.gen-a")   // kept to the end
	failed := h.connected("n1", "amq.gen-b") // its connection failed
	other := h.connected("n2", "amq.gen-c")  // kept to the end

	answered := h.request(kept) // confirmed, answered once
	h.requestConfirmed(answered)
	h.replied(answered, "n1", false)
	h.delivered("1", kept)
	twice := h.request(kept) // answered twice: its request came to two servers
	h.requestConfirmed(twice)
	h.delivered("2", kept)
	h.delivered("2", kept)
	unanswered := h.request(kept) // confirmed, never answered
	h.requestConfirmed(unanswered)
	returned := h.request(kept) // its reply came back unroutable
	h.replied(returned, "n2", true)
	h.delivered("4", kept)
	misrouted := h.request(other) // its reply went to another client's queue
	h.delivered("5", kept)
	if n := h.awaiting(); n != 1 {
		t.Errorf("awaiting replies: %d, want 1 (the unanswered request)", n)
	}
	lostWithQueue := h.request(failed) // confirmed; its queue went with the connection
	h.requestConfirmed(lostWithQueue)
	h.replied(lostWithQueue, "n0", true)
	h.ended(failed, false)
	h.delivered("99", other) // nobody sent it
	h.ended(kept, true)
	h.ended(other, true)

	v := h.check()
	if v.Requests != 6 || v.Confirmed != 4 || v.Answered != 4 || v.Repeated != 1 || v.Clients != 3 || v.Clean != 2 {
		t.Errorf("verdict %+v", v)
	}
	for _, c := range []struct {
		what      string
		got, want []uint64
	}{
		{"misrouted", v.Misrouted, []uint64{misrouted}},
		{"returned while its queue lived", v.ReturnedLive, []uint64{returned}},
		{"unanswered", v.Unanswered, []uint64{unanswered}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if len(v.Strays) != 1 {
		t.Errorf("strays %q, want one", v.Strays)
	}
	if v.ok() {
		t.Error("a defective RPC history judged correct")
	}
	if clean := (rpcVerdict{Requests: 1}); !clean.ok() {
		t.Error("a clean RPC verdict judged defective")
	}
}
