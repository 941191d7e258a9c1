package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
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
	waitFor(t, 10*time.Second, "c to hold the demotion", func() error {
		for _, s := range c.member("g").raft.GetConfiguration().Configuration().Servers {
			if s.ID == b.id && s.Suffrage == raft.Nonvoter {
				return nil
			}
		}
		return errors.New("b still votes in c's configuration")
	})
	h.stop(c)
	if err := lr.AddVoter(b.id, raft.ServerAddress(b.addr), 0, 5*time.Second).Error(); err != nil {
		t.Fatalf("promote %s: %v", b.id, err)
	}
	h.apply("g", 10, 16)
	h.stop(ld)
	h.restart(c)
	if nl := h.leader("g"); nl != b {
		t.Fatalf("%s leads, want %s, whose log is ahead", nl.id, b.id)
	}
	h.apply("g", 5, 16)
}
