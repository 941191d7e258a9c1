package replica

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// campaigningTransport is raft's in-memory transport with the gRPC
// transport's Campaign: a TimeoutNow to the member itself.
type campaigningTransport struct {
	*raft.InmemTransport
	self raft.ServerAddress
}

func (c campaigningTransport) Campaign(context.Context) error {
	var resp raft.TimeoutNowResponse
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte(c.self)}}
	return c.TimeoutNow("", c.self, req, &resp)
}

// suspicious configures member n for the failover tests: it campaigns
// through its transport, every node's gossip calls the others failed,
// and the timeouts are long, so that neither raft's own election nor a
// heartbeat from the leader (raft.LastContact) gets in the way.
func suspicious(n string, cfg *Config) {
	tr := cfg.Transport.(*raft.InmemTransport)
	tr.Connect(raft.ServerAddress(n), tr)
	cfg.Transport = campaigningTransport{tr, raft.ServerAddress(n)}
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = 30*time.Second, 30*time.Second
	cfg.SeesAlive = func(context.Context, string, string) (bool, error) { return false, nil }
}

// TestSuspectedLeaderThatAnswersKeepsItsRole: gossip on every node calls
// the leader's node failed (as just after a partition heals, when the
// node that was cut off pushes its view to the others), but the leader
// answers that it still leads: no follower campaigns, so its term stays.
// Once the leader is really gone, the same suspicion elects a new one
// at once, long before the groups' 30 s timeout would.
func TestSuspectedLeaderThatAnswersKeepsItsRole(t *testing.T) {
	var mu sync.Mutex
	leads := map[string]func() bool{} // by member: does it lead, as its node would answer
	g := newGroupWith(t, perQueueFiles, func(n string, cfg *Config) {
		suspicious(n, cfg)
		cfg.LeadsAt = func(_ context.Context, node string) (bool, error) {
			mu.Lock()
			f := leads[node]
			mu.Unlock()
			if f == nil {
				return false, context.DeadlineExceeded // the node does not answer
			}
			return f(), nil
		}
	})
	mu.Lock()
	for n, r := range g.members {
		leads[n] = r.IsLeader
	}
	mu.Unlock()
	leader, lr := g.leader()
	publish(t, lr, 0, 10)
	term := lr.Status().Term

	for n, r := range g.members {
		if n != leader {
			r.LeaderSuspected(leader)
		}
	}
	// Rank 0 would campaign at once and rank 1 half a second later.
	time.Sleep(3 * time.Second)
	for n, r := range g.members {
		if st := r.Status(); st.Term != term {
			t.Fatalf("%s at term %d after a suspicion of the live leader %s, was %d", n, st.Term, leader, term)
		}
	}
	if now, _ := g.leader(); now != leader {
		t.Fatalf("leader moved from %s to %s", leader, now)
	}

	mu.Lock()
	delete(leads, leader)
	mu.Unlock()
	g.stop(leader)
	start := time.Now()
	for _, r := range g.members {
		r.LeaderSuspected(leader)
	}
	next, nr := g.leader()
	if next == leader || nr.Status().Term <= term {
		t.Fatalf("leader %s at term %d after %s was stopped at term %d", next, nr.Status().Term, leader, term)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("a new leader took %v", d)
	}
	publish(t, nr, 10, 5)
}

// TestFailoverSurvivesARivalsHopelessCampaign: the member that campaigns
// when gossip calls the leader's node failed wins, and a rival whose log
// is behind (it cannot win) campaigns at once after and deposes it with a
// higher term. Its one campaign spent, the winner used to wait out raft's
// own timeout (30 s for queue groups) with the group leaderless, and the
// rival's question was blocked behind it: the chaos harness saw publishes
// wait 30 s after a partition healed. It asks again, as after a start.
func TestFailoverSurvivesARivalsHopelessCampaign(t *testing.T) {
	g := newGroupWith(t, perQueueFiles, suspicious)
	leader, lr := g.leader()
	var rest []string
	for _, n := range g.names {
		if n != leader {
			rest = append(rest, n)
		}
	}
	best, behind := rest[0], rest[1] // rank 0 campaigns first
	g.stop(behind)
	publish(t, lr, 0, 5) // the leader and best have them; behind does not
	g.stop(leader)
	g.start(behind, false)

	g.members[best].LeaderSuspected(leader)
	deadline := time.Now().Add(10 * time.Second)
	for !g.members[best].IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the suspicion elected nobody")
		}
		time.Sleep(time.Millisecond)
	}
	// Deposes best; it cannot win, unless best's leadership caught it up
	// meanwhile (then it leads, which is as good).
	g.members[behind].campaignNow("a rival's hopeless campaign")
	start := time.Now()
	var now string
	for now == "" && time.Since(start) < 10*time.Second {
		for n, r := range g.members {
			other := best
			if n == best {
				other = behind
			}
			if _, id := g.members[other].raft.LeaderWithID(); r.IsLeader() && string(id) == n {
				now = n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if now == "" {
		t.Fatalf("no leader within 10 s of the rival's campaign (best %s: %s)", best, g.members[best].Status().State)
	}
	publish(t, g.members[now], 5, 5)
}
