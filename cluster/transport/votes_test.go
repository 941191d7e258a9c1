package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/testwait"
)

// TestMissedPromotionElects: c is stopped after b was demoted to a
// non-voter and before b's promotion, which the leader and b commit
// alone. With the leader gone too, b and c must elect: b, whose log is
// ahead, is the only one that can win, and c's configuration, which still
// has b as a non-voter, made hashicorp/raft refuse b's pre-vote and vote
// ("node is not a voter"), so the group waited for the old leader.
func TestMissedPromotionElects(t *testing.T) {
	h := newHarness(t, 3, []string{"g"}, nil)
	ld := h.leader("g")
	var b, c *node
	for _, nd := range h.nodes {
		switch {
		case nd == ld:
		case b == nil:
			b = nd
		default:
			c = nd
		}
	}
	lr := ld.member("g").raft
	if err := lr.DemoteVoter(b.id, 0, 5*time.Second).Error(); err != nil {
		t.Fatalf("demote %s: %v", b.id, err)
	}
	testwait.ForNil(t, 10*time.Second, "c to hold the demotion", func() error {
		for _, s := range c.member("g").raft.GetConfiguration().Configuration().Servers {
			if s.ID == b.id && s.Suffrage == raft.Nonvoter {
				return nil
			}
		}
		return errors.New("b still votes in c's configuration")
	})
	h.stop(c)
	promote(t, lr, b)
	h.apply("g", 10, 16)
	h.stop(ld)
	h.restart(c)
	if nl := h.leader("g"); nl != b {
		t.Fatalf("%s leads, want %s, whose log is ahead", nl.id, b.id)
	}
	h.apply("g", 5, 16)
}

// promote makes nd a voter through the leader's raft lr. hashicorp/raft
// counts a promoted member in its commitment only after it has sent it the
// configuration entry, so the member's acknowledgement can come back
// uncounted; with the third member stopped the entry then commits only
// once another follows. A barrier every half second is that entry, as
// raftq/replica's waitPromotion does (without it the test hung under CI's
// load, once).
func promote(t *testing.T, lr *raft.Raft, nd *node) {
	t.Helper()
	errc := make(chan error, 1)
	f := lr.AddVoter(nd.id, raft.ServerAddress(nd.addr), 0, 5*time.Second)
	go func() { errc <- f.Error() }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("promote %s: %v", nd.id, err)
			}
			return
		case <-tick.C:
			lr.Barrier(time.Second)
		case <-deadline:
			t.Fatalf("promote %s: not committed after 30s", nd.id)
		}
	}
}
