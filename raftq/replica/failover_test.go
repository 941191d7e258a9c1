package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/testwait"
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

func (c campaigningTransport) RaiseTerm(_ context.Context, id string, term uint64) error {
	var resp raft.RequestVoteResponse
	req := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(c.self)}, Term: term}
	return c.RequestVote(raft.ServerID(id), c.self, req, &resp)
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
	// Rank 0 would campaign at once and rank 1 half a second later: a
	// window for a wrongful campaign, which leaves nothing to wait on.
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
	nr := newLeaderWithin(t, g, leader, term, start, 10*time.Second)
	publish(t, nr, 10, 5)
}

// newLeaderWithin waits for the group's leader and fails the test unless
// it is not old, leads at a term above term, and took at most d since
// start.
func newLeaderWithin(t *testing.T, g *group, old string, term uint64, start time.Time, d time.Duration) *Replica {
	t.Helper()
	next, nr := g.leader()
	if next == old || nr.Status().Term <= term {
		t.Fatalf("leader %s at term %d after %s lost the role at term %d", next, nr.Status().Term, old, term)
	}
	if took := time.Since(start); took > d {
		t.Fatalf("a new leader took %v", took)
	}
	return nr
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
	// Polled every millisecond rather than with testwait's backoff: the
	// rival is to campaign as soon as best leads, before best's
	// leadership catches it up.
	deadline := time.Now().Add(10 * time.Second)
	for !g.members[best].IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the suspicion elected nobody")
		}
		time.Sleep(time.Millisecond)
	}
	// Deposes best; it cannot win, unless best's leadership caught it up
	// meanwhile (then it leads, which is as good).
	g.members[behind].fo.campaignNow("a rival's hopeless campaign")
	var now string
	testwait.Until(10*time.Second, func() bool {
		for n, r := range g.members {
			other := best
			if n == best {
				other = behind
			}
			if _, id := g.members[other].raft.LeaderWithID(); r.IsLeader() && string(id) == n {
				now = n
			}
		}
		return now != ""
	})
	if now == "" {
		t.Fatalf("no leader within 10 s of the rival's campaign (best %s: %s)", best, g.members[best].Status().State)
	}
	publish(t, g.members[now], 5, 5)
}

// cut breaks the link between members a and b both ways; join mends it.
func (g *group) cut(a, b string) {
	g.trans[a].Disconnect(raft.ServerAddress(b))
	g.trans[b].Disconnect(raft.ServerAddress(a))
}

func (g *group) join(a, b string) {
	g.trans[a].Connect(raft.ServerAddress(b), g.trans[b])
	g.trans[b].Connect(raft.ServerAddress(a), g.trans[a])
}

// splitVote makes members a and b campaign at once while they cannot
// reach each other (nor anyone else), so that each votes for itself and
// hears no other vote, and waits until both are candidates. raft's
// candidate asks each voter once and then waits for its election timeout
// (30 s or more here).
func (g *group) splitVote(t *testing.T, a, b string) {
	t.Helper()
	g.cut(a, b)
	go g.members[a].fo.campaignNow("a split vote")
	go g.members[b].fo.campaignNow("a split vote")
	testwait.For(t, 20*time.Second, "both candidates", func() bool {
		return g.members[a].raft.State() == raft.Candidate && g.members[b].raft.State() == raft.Candidate
	})
	g.join(a, b)
}

// agreedLeader waits up to limit for a member that leads and that every
// other member follows, and returns it ("" if none).
func (g *group) agreedLeader(limit time.Duration) string {
	agreed := ""
	testwait.Until(limit, func() bool {
		for n, r := range g.members {
			if !r.IsLeader() {
				continue
			}
			all := true
			for m, o := range g.members {
				if _, id := o.raft.LeaderWithID(); m != n && string(id) != n {
					all = false
				}
			}
			if all {
				agreed = n
				return true
			}
		}
		return false
	})
	return agreed
}

// suspiciousGroupWithMessages is a group of suspicious members whose
// leader holds three messages, and the two other members.
func suspiciousGroupWithMessages(t *testing.T) (g *group, leader string, lr *Replica, rest []string) {
	g = newGroupWith(t, perQueueFiles, suspicious)
	leader, lr = g.leader()
	publish(t, lr, 0, 3)
	for _, n := range g.names {
		if n != leader {
			rest = append(rest, n)
		}
	}
	return g, leader, lr, rest
}

// TestSplitVoteEndsWithinSeconds: the two survivors of a leader's node
// campaign at the same moment and split the vote. raft leaves a candidate
// waiting for its election timeout, 30 s or more for queue groups; a
// candidacy that has stayed open for seconds is started again, the
// members' ranks keeping the second tries apart.
func TestSplitVoteEndsWithinSeconds(t *testing.T) {
	g, leader, _, rest := suspiciousGroupWithMessages(t)
	g.stop(leader)
	start := time.Now()
	g.splitVote(t, rest[0], rest[1])
	now := g.agreedLeader(10 * time.Second)
	if now == "" {
		t.Fatalf("no leader %v after the split vote (%s: %s, %s: %s)", time.Since(start).Round(time.Millisecond),
			rest[0], g.members[rest[0]].Status().State, rest[1], g.members[rest[1]].Status().State)
	}
	publish(t, g.members[now], 3, 2)
}

// TestCutOffLeaderHealsIntoASplitVote is the chaos harness's 33 s
// leaderless queue: the leader is cut off long enough to append entries
// nobody else has, and the two others, cut off from each other too,
// campaign at once and split the vote at term T. When the links heal,
// the old leader's next publish meets term T and it steps down, keeping
// its own term (raft's handleStaleTerm); asked whether they would vote
// for it at its next term, T, the others say yes (its log is the
// longest), yet they have voted at T already and refuse the campaign.
// Everyone waited out the candidates' election timeout. A campaign now
// first adopts the highest term the voters answered with: the old leader
// wins (a second after it stepped down, before the candidacies count as
// stalled) and its log, publishes included, stands. (Their callers heard
// "not the leader" when it stepped down, as raft fails whatever a leader
// that loses its leadership has pending; the router sends such a publish
// again under the same number, stored once.)
func TestCutOffLeaderHealsIntoASplitVote(t *testing.T) {
	g, leader, lr, rest := suspiciousGroupWithMessages(t)
	g.cut(leader, rest[0])
	g.cut(leader, rest[1])
	var mu sync.Mutex
	answered := map[int]error{}
	publishOne := func(i int) {
		msg := &queue.Message{RoutingKey: "q", Body: []byte(fmt.Sprintf("m%d", i))}
		lr.Enqueue(context.Background(), msg, func(err error) {
			mu.Lock()
			answered[i] = err
			mu.Unlock()
		})
	}
	for i := 3; i < 8; i++ {
		publishOne(i)
	}
	before := lr.raft.LastIndex()
	testwait.For(t, 20*time.Second, "the cut-off leader's entries", func() bool { return lr.raft.LastIndex() > before })
	g.splitVote(t, rest[0], rest[1])
	g.join(leader, rest[0])
	g.join(leader, rest[1])
	start := time.Now()
	publishOne(8) // meets term T: the old leader steps down
	now := g.agreedLeader(10 * time.Second)
	if now == "" {
		var states []string
		for _, n := range g.names {
			st := g.members[n].Status()
			states = append(states, fmt.Sprintf("%s: %s at term %d", n, st.State, st.Term))
		}
		t.Fatalf("no leader %v after the links healed (%v)", time.Since(start).Round(time.Millisecond), states)
	}
	if now != leader {
		t.Fatalf("%s leads, not %s, whose log is the longest", now, leader)
	}
	publish(t, g.members[now], 9, 2)
	testwait.For(t, 20*time.Second, "answers to the cut-off leader's publishes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answered) == 6
	})
	if st := g.members[now].Stats(); st.Ready != 3+6+2 {
		t.Fatalf("%d messages ready, want %d", st.Ready, 3+6+2)
	}
}

// TestLeaderRemovingItselfHandsOff: asked to remove itself, the leader
// hands its leadership off and answers "not the leader" rather than
// commit its removal and fall silent, which left the others leaderless
// until their heartbeat timeout (30 s or more for queue groups). The
// removal then goes through at the new leader, and the queue keeps its
// messages.
func TestLeaderRemovingItselfHandsOff(t *testing.T) {
	g := newGroup(t, perQueueFiles)
	leader, lr := g.leader()
	publish(t, lr, 0, 3)
	if _, err := lr.RemoveServer(leader); err != ErrNotLeader {
		t.Fatalf("the leader removing itself: %v, want ErrNotLeader", err)
	}
	if lr.IsLeader() {
		t.Fatalf("%s still leads after removing itself", leader)
	}
	now := g.agreedLeader(5 * time.Second)
	if now == "" || now == leader {
		t.Fatalf("no new leader within 5 s of %s handing off (got %q)", leader, now)
	}
	nr := g.members[now]
	if _, err := nr.RemoveServer(leader); err != nil {
		t.Fatalf("remove %s at the new leader %s: %v", leader, now, err)
	}
	servers, err := nr.Servers()
	if err != nil {
		t.Fatal(err)
	}
	if _, in := servers[leader]; in || len(servers) != 2 {
		t.Fatalf("configuration after the removal: %v", servers)
	}
	publish(t, nr, 3, 2)
	if st := nr.Stats(); st.Ready != 5 {
		t.Fatalf("%d messages ready, want 5", st.Ready)
	}
}

// TestSlowQuestionKeepsTheNewLeader: before campaigning because the
// leader's node failed, a member asks that node whether it still leads,
// which takes up to a second when the node cannot be reached (a dial
// that times out, as just after a partition heals). Meanwhile the member
// ranked before it campaigned and won; a campaign after the answer
// deposed the new leader, and the chaos harness saw the queue leaderless
// for 2 s when the deposer's log was behind. A member that hears of a
// new leader, or of a higher term, while it asks leaves it be.
func TestSlowQuestionKeepsTheNewLeader(t *testing.T) {
	g := newGroupWith(t, perQueueFiles, func(n string, cfg *Config) {
		suspicious(n, cfg)
		cfg.LeadsAt = func(ctx context.Context, _ string) (bool, error) {
			<-ctx.Done() // the failed node does not answer
			return false, ctx.Err()
		}
	})
	leader, lr := g.leader()
	publish(t, lr, 0, 3)
	g.stop(leader)
	for _, r := range g.members {
		r.LeaderSuspected(leader)
	}
	first, fr := g.leader()
	term := fr.Status().Term
	// The second rank's question ends about half a second after the
	// first rank campaigned; give it time to do harm (a window, with
	// nothing to wait on).
	time.Sleep(3 * time.Second)
	now, nr := g.leader()
	if st := nr.Status(); now != first || st.Term != term {
		t.Fatalf("%s led at term %d, then %s at term %d", first, term, now, st.Term)
	}
	publish(t, nr, 3, 2)
}

// TestRestartedLeaderOnADrainedNode: the leader's node restarts quicker
// than gossip notices a failure, and drained, so its member does not
// campaign; the others saw no failure (their gossip sees the node alive)
// and still believe in their old leader, so nobody elects until their
// 30 s timeout. Told of the restart (LeaderRestarted, from the node's new
// boot), they elect among themselves within seconds, with every message.
func TestRestartedLeaderOnADrainedNode(t *testing.T) {
	var mu sync.Mutex
	leads := map[string]func() bool{}
	drained := map[string]bool{}
	g := newGroupWith(t, perQueueFiles, func(n string, cfg *Config) {
		suspicious(n, cfg)
		cfg.SeesAlive = func(context.Context, string, string) (bool, error) { return true, nil }
		cfg.LeadsAt = func(_ context.Context, node string) (bool, error) {
			mu.Lock()
			f := leads[node]
			mu.Unlock()
			if f == nil {
				return false, context.DeadlineExceeded
			}
			return f(), nil
		}
		mu.Lock()
		cfg.Drained = drained[n]
		mu.Unlock()
	})
	setLeads := func() {
		mu.Lock()
		defer mu.Unlock()
		for n, r := range g.members {
			leads[n] = r.IsLeader
		}
	}
	setLeads()
	leader, lr := g.leader()
	publish(t, lr, 0, 10)
	term := lr.Status().Term

	g.stop(leader)
	mu.Lock()
	drained[leader] = true
	mu.Unlock()
	g.start(leader, false)
	setLeads()

	// Nobody elects by itself: the restarted member is drained, the
	// others follow the leader they knew. Several election timeouts
	// pass, in which an election would show.
	time.Sleep(2 * time.Second)
	for n, r := range g.members {
		if r.IsLeader() {
			t.Fatalf("%s leads without being told of the restart", n)
		}
	}

	start := time.Now()
	for n, r := range g.members {
		if n != leader {
			r.LeaderRestarted(leader)
		}
	}
	nr := newLeaderWithin(t, g, leader, term, start, 10*time.Second)
	publish(t, nr, 10, 5)
	if got := nr.Stats().Ready; got != 15 {
		t.Fatalf("the new leader holds %d messages, want 15", got)
	}
}

// unheardTransport is a member's transport whose appends never arrive: it
// can win an election, but the members that voted for it hear nothing
// from it afterwards.
type unheardTransport struct{ campaigningTransport }

func (unheardTransport) AppendEntries(raft.ServerID, raft.ServerAddress, *raft.AppendEntriesRequest, *raft.AppendEntriesResponse) error {
	return errors.New("cut off")
}

func (unheardTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// TestFirstLeaderGoneBeforeItsFirstEntries: a new group's chosen member
// wins the first election, so both followers hold a term, and its node
// goes before any entry of it reaches them. The followers (Follow) had
// kept the group's configuration unwritten, and raft refuses to bootstrap
// a member with a term: they had no configuration to campaign with, and
// the queue stayed leaderless until that node returned (CI saw it when a
// node stopped a second after a declaration). Each is now opened again
// with the configuration written (Rebootstrap), and they elect.
func TestFirstLeaderGoneBeforeItsFirstEntries(t *testing.T) {
	eachStorage(t, func(t *testing.T, st storage) {
		reopen := make(chan string, 4)
		var mu sync.Mutex
		rebootstrapped := map[string]bool{}
		g := newGroupWith(t, st, func(n string, cfg *Config) {
			suspicious(n, cfg)
			if n == "a" {
				cfg.Transport = unheardTransport{cfg.Transport.(campaigningTransport)}
				return
			}
			cfg.Bootstrap, cfg.Follow = true, true
			cfg.Rebootstrap = func(members []string) {
				if len(members) != 3 {
					t.Errorf("%s reopens with %d peers, want the group's 3", n, len(members))
				}
				reopen <- n
			}
			mu.Lock()
			cfg.Rebootstrapped = rebootstrapped[n]
			mu.Unlock()
		})
		// a campaigned as it opened, before b and c were there; started
		// again on its state, it asks them and campaigns.
		g.stop("a")
		g.start("a", true)
		testwait.For(t, 5*time.Second, "a leads, with b and c holding its term but no entry", func() bool {
			if !g.members["a"].IsLeader() {
				return false
			}
			for _, n := range []string{"b", "c"} {
				if st := g.members[n].Status(); st.Term == 0 || st.LastLogIndex != 0 {
					return false
				}
			}
			return true
		})
		g.stop("a")
		for _, n := range []string{"b", "c"} {
			g.members[n].LeaderSuspected("a")
		}
		for range 2 {
			select {
			case n := <-reopen:
				mu.Lock()
				rebootstrapped[n] = true
				mu.Unlock()
				g.stop(n)
				g.start(n, true)
			case <-time.After(10 * time.Second):
				t.Fatal("the followers were not opened again")
			}
		}
		_, lr := g.leader()
		publish(t, lr, 0, 5)
	})
}
