package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/testwait"
)

// TestAckedFollowsReplication: a group that tracks acknowledgements
// learns, on its leader, that each follower holds every entry committed,
// and when it last answered; a group that does not track learns nothing.
func TestAckedFollowsReplication(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3, []string{"tracked", "untracked"}, nil)
	for _, nd := range h.nodes {
		nd.member("tracked").trans.TrackAcks()
	}
	ld := h.leader("tracked")
	var last uint64
	for i := range 20 {
		f := ld.member("tracked").raft.Apply([]byte{byte(i)}, 5*time.Second)
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		last = f.Index()
	}
	tr := ld.member("tracked").trans
	for _, nd := range h.nodes {
		if nd == ld {
			continue
		}
		testwait.ForNil(t, 5*time.Second, "follower "+string(nd.id)+" acknowledged the last entry", func() error {
			idx, at := tr.Acked(raft.ServerAddress(nd.addr))
			if idx < last || time.Since(at) > time.Second {
				return errAckBehind
			}
			return nil
		})
	}
	h.apply("untracked", 5, 10)
	uld := h.leader("untracked")
	for _, nd := range h.nodes {
		if idx, at := uld.member("untracked").trans.Acked(raft.ServerAddress(nd.addr)); idx != 0 || !at.IsZero() {
			t.Fatalf("an untracked group recorded %d at %v", idx, at)
		}
	}
}

var errAckBehind = errors.New("acknowledged index behind")
