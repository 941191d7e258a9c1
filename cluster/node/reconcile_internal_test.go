package node

import (
	"testing"

	"github.com/warrenmq/warren/membership"
)

// TestRestartQuickerThanGossipRebalances: a node that restarted before
// gossip reported it gone here (its leave reached other nodes, or none)
// leads nothing after its restart, as after a failure, so its return
// schedules the rebalance a return after a failure does. CI once saw the metadata
// leader miss the leave, and the leaders stayed 4-2-0.
func TestRestartQuickerThanGossipRebalances(t *testing.T) {
	ev := func(kind membership.EventKind) membership.Event {
		return membership.Event{Kind: kind, Member: membership.Member{Meta: membership.Meta{Name: "warren-2"}}}
	}
	for _, tc := range []struct {
		name      string
		events    []membership.Event
		restarted bool // memberEvent's verdict on the last event
		rebalance bool
	}{
		{"restarted, never reported gone", []membership.Event{ev(membership.Updated)}, true, true},
		{"restarted, a new join", []membership.Event{ev(membership.Joined)}, true, true},
		{"back after a failure", []membership.Event{ev(membership.Failed), ev(membership.Joined)}, false, true},
		{"back after leaving", []membership.Event{ev(membership.Departed), ev(membership.Updated)}, false, true},
		{"new metadata, same start", []membership.Event{ev(membership.Updated)}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clusterNode{self: "warren-0"}
			c.rec = newReconciler(c)
			for i, e := range tc.events {
				c.rec.event(e, tc.restarted && i == len(tc.events)-1)
			}
			_, rebalance := c.rec.take()
			if rebalance != tc.rebalance {
				t.Fatalf("rebalance scheduled: %v, want %v", rebalance, tc.rebalance)
			}
			if got := c.rec.rejoined["warren-2"]; got != tc.rebalance {
				t.Fatalf("warren-2 counted as rejoined: %v, want %v", got, tc.rebalance)
			}
		})
	}
}
