package replica

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Prompt elections with long heartbeat timeouts.
//
// Queue groups run with long heartbeat and election timeouts (ten seconds
// by default), so that idle groups send few heartbeats; raft alone would
// elect a new leader only after the old one had been silent that long.
// Three moments need an election sooner, and hashicorp/raft has no way to
// make a follower campaign at once except the TimeoutNow of a leadership
// transfer, which the transport can hand to its own member (Campaign).
//
// A leader's node fails, as gossip reports it: LeaderSuspected makes one
// surviving voter campaign at once, once a majority of the voters' nodes
// see the leader's node failed too (majorityAgreesFailed: a member cut off
// by a partition hears its gossip call every other node failed, and its
// campaign would only raise its term, deposing the live leader when the
// partition heals). The voters are ranked by name (the failed node left
// out) and the k-th campaigns k times campaignStagger after that
// agreement if the group still has no leader, so that two do not split
// the vote and one whose log is behind (it cannot win) is followed by the
// next. Such an election skips pre-vote and is granted by voters that
// still believe in the old leader; gossip has declared that leader's node
// dead, after its own suspicion period. This is what makes a killed
// leader's queues take publishes again within about the gossip's
// detection time, whatever the heartbeat timeout. Should none of them
// win, raft's own timeout elects.
//
// A leader's node restarts quicker than gossip notices the failure:
// LeaderRestarted, as above, but without asking whether the others agree
// (the node's new boot is no suspicion). Its restarted member would win
// an election of its own, as the others still know it for their leader;
// on a drained node it does not campaign, and the others must.
//
// A member starts on existing state (its node restarted, perhaps with the
// whole cluster): the group may have no leader at all. expectLeader asks
// the other voters what raft's pre-vote asks, whether they would vote for
// this member at the next term. A voter says yes only if it knows no
// leader and this member's log is at least as up to date as its own
// (raft's requestPreVote); when a majority would, this member included,
// it campaigns at once. The same ranking spaces out the members of a
// cluster that restarts as a whole, and the question is asked again, less
// and less often, until the group has a leader. A group that has one
// refuses, and the member waits for the leader's heartbeat as usual.
//
// A group loses its leader any other way (it stepped down, or a higher
// term deposed it, such as a member's failed campaign): leaderLost asks
// the same question as after a start, a second later, rather than leave
// the group leaderless for raft's own timeout of ten to twenty seconds.
//
// An election fails: raft's candidate asks each voter once and then waits
// for its election timeout, 30 s or more for queue groups, so a split
// vote, a refusal or an answer lost with a link would leave the group
// leaderless that long. A member whose candidacy has stayed open for
// candidateStall (plus its rank's wait) asks as after a start and
// campaigns again. And every campaign first adopts the highest term the
// voters answered the pre-vote question with (campaignAbove): raft
// campaigns at its own term plus one, which can be a term the voters have
// voted in already, and they refuse a second candidate there.
//
// Why it is safe: raft's safety never depends on timeouts or on who
// campaigns, only its liveness does. A wrong suspicion of a live leader
// costs one election; the restart question disturbs nobody, since a
// group with a leader says no. (The timeouts cannot be shortened instead:
// raft requires HeartbeatTimeout ≥ LeaderLeaseTimeout at run time, and a
// queue group's lease is the whole heartbeat timeout, which its lingering
// heartbeats need; replica.go.)

// failover is a replica's suspicion state and its elections, and the
// drain state (drain.go). mu serialises the replica's ReloadConfig calls,
// a read-modify-write of raft's reloadable config (reload.go).
type failover struct {
	core *core

	mu sync.Mutex
	// base are the configured timeouts. Zero for a one-member group,
	// which has nobody to fail over to.
	base raft.ReloadableConfig

	suspecting atomic.Bool

	// drained and raised are the drain state (drain.go), under mu: a
	// drained follower's timeouts are raised, and restoreTimeouts keeps
	// them so.
	drained, raised bool

	// lateConf is a new group's configuration, kept by a member that was
	// not chosen to lead first until it hears from the group (Config's
	// Follow); nil once used or not needed.
	lateConf atomic.Pointer[raft.Configuration]
}

// bootstrapLate writes the group's first configuration on a member that
// has no state yet when the member chosen to lead first is reported
// failed: killed right after the declaration, before it had sent its
// configuration to anyone, it would otherwise leave the queue without a
// leader until it came back. It is the configuration the chosen member
// bootstrapped with, so this is as if every member had bootstrapped at
// the start, which raft allows; and since nothing can have committed
// without a second member holding state, nothing is lost by it. A member
// that voted for the chosen one (it won, then failed before its first
// entries arrived) holds a term, and raft bootstraps only members that
// hold nothing: the node opens it again to write the configuration
// (Config.Rebootstrap).
func (fo *failover) bootstrapLate() {
	conf := fo.lateConf.Swap(nil)
	if conf == nil || fo.core.raft.LastIndex() != 0 {
		return
	}
	err := fo.core.raft.BootstrapCluster(*conf).Error()
	switch {
	case errors.Is(err, raft.ErrCantBootstrap) && fo.core.cfg.Rebootstrap != nil:
		// It holds a term: it voted for the chosen member, which won
		// and failed before its first entries reached this one. raft
		// bootstraps only members that never voted, so the node opens
		// this replica again to write the configuration (Open's
		// bootstrapAfterVote).
		var members []string
		for _, s := range conf.Servers {
			members = append(members, string(s.ID))
		}
		fo.core.log.Info("the leader first elected for a new queue failed before it was heard from; opening this member again to write its configuration")
		go fo.core.cfg.Rebootstrap(members)
	case err != nil:
		fo.core.log.Warn("bootstrap after the first leader failed", "err", err)
	default:
		fo.core.log.Info("the member chosen to lead a new queue failed before it was heard from; bootstrapped its configuration here")
	}
}

// bootstrapAfterVote writes conf as the first entry of a member's log, as
// raft's BootstrapCluster does, on a member that holds a term (it voted in
// its group's first election) but no entry and no snapshot; raft's own
// bootstrap refuses any member with a term. It is the entry every member
// of the group was to bootstrap with (Config.Follow), the same index,
// term and content as the chosen member's first entry, so the logs agree
// as raft requires; the term and vote the member holds stay as they are.
func bootstrapAfterVote(logs raft.LogStore, snaps raft.SnapshotStore, conf raft.Configuration) error {
	last, err := logs.LastIndex()
	if err != nil {
		return err
	}
	taken, err := snaps.List()
	if err != nil {
		return err
	}
	if last > 0 || len(taken) > 0 {
		return nil // it heard from the group after all
	}
	return logs.StoreLog(&raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(conf)})
}

// init records the timeouts of a multi-member group's config.
func (f *failover) init(rc *raft.Config) {
	f.base.HeartbeatTimeout, f.base.ElectionTimeout = rc.HeartbeatTimeout, rc.ElectionTimeout
}

// LeaderSuspected tells the replica that node has failed, as gossip
// reports it. If this member follows a leader on that node (or knows of
// no leader), the group's surviving voters campaign in turn until it has
// a leader again. It returns at once.
func (r *Replica) LeaderSuspected(node string) { r.fo.suspect(node, leaderFailed) }

// LeaderRestarted tells the replica that node started again without
// gossip reporting it failed (a restart quicker than gossip's failure
// detection shows only as the node's new boot). A member on that node
// that led before lost the role with its process, but the others still
// believe in it and refuse to vote for anyone else until their heartbeat
// timeout; the restarted member itself would campaign and win, unless
// its node is drained, which keeps it out of elections: the group then
// stayed leaderless for the whole timeout. The restart is a fact, not a
// suspicion, so the survivors need not agree that the node failed (their
// gossip sees it alive); they campaign in turn as after a failure, once
// the restarted node answers that its member does not lead.
func (r *Replica) LeaderRestarted(node string) { r.fo.suspect(node, leaderRestarted) }

// suspicion is why a member looks for a new leader (awaitLeader).
type suspicion int

const (
	// leaderFailed: gossip reports the leader's node failed.
	leaderFailed suspicion = iota
	// leaderRestarted: the leader's node started again.
	leaderRestarted
	// noLeader: the member started on existing state, or its group lost
	// its leader some other way.
	noLeader
)

// suspect starts the survivors' election for a leader on node that failed
// or restarted, if this member follows it.
func (fo *failover) suspect(node string, why suspicion) {
	if fo.base.HeartbeatTimeout == 0 || fo.core.stopped.Load() || node == fo.core.cfg.NodeID || fo.isDrained() {
		return // a drained member leaves the election to the others
	}
	fo.bootstrapLate()
	if fo.core.raft.State() == raft.Leader {
		return
	}
	if _, id := fo.core.raft.LeaderWithID(); id != "" && string(id) != node {
		return
	}
	if !fo.suspecting.CompareAndSwap(false, true) {
		return
	}
	go fo.awaitLeader(node, why, 0)
}

// expectLeader makes a member that started on existing state campaign as
// soon as a majority of its group would vote for it (nobody leads), rather
// than after a whole heartbeat timeout; not while it is drained, which
// the node may set after the member opened.
func (fo *failover) expectLeader() {
	if fo.base.HeartbeatTimeout == 0 || !fo.suspecting.CompareAndSwap(false, true) {
		return
	}
	go fo.awaitLeader("", noLeader, 0)
}

// leaderLostGrace is how long a member that lost its leader leaves raft's
// own election (or a leadership transfer) to finish before it asks.
const leaderLostGrace = time.Second

// leaderLost makes a follower whose group has no leader any more (its
// leader stepped down, or was deposed by a higher term), or a member that
// became a candidate, ask, as after a start, whether a majority would
// vote for it, and campaign if so (a candidate: once its candidacy
// stalls). Without
// it the group waited out raft's own timeout, ten to twenty seconds with
// the queue groups' long heartbeat timeout: the chaos harness saw a queue
// leaderless for 40 s after a member's failed election deposed the leader
// that had just won.
func (fo *failover) leaderLost() {
	if fo.base.HeartbeatTimeout == 0 || fo.core.stopped.Load() || fo.isDrained() || !fo.suspecting.CompareAndSwap(false, true) {
		return
	}
	go fo.awaitLeader("", noLeader, leaderLostGrace)
}

// campaignStagger is how long the k-th ranked voter waits, times k,
// before campaigning (or, after a start, asking whether it may).
const campaignStagger = 500 * time.Millisecond

// candidateStall is how long a candidacy may stay open before this
// member counts it failed (awaitLeader). An election takes a round trip
// to a majority; a voter that refuses, or an answer lost with a link,
// leaves raft's candidate waiting for its election timeout, which for
// queue groups is 30 s or more.
const candidateStall = 2 * time.Second

// Restart questions: the first after the member's rank's stagger, each
// later one twice as long after the last, up to askGapMax.
const (
	askGapFirst = 500 * time.Millisecond
	askGapMax   = 4 * time.Second
)

// campaignRank is this member's place among the group's voters other
// than failed, by name with Config.FirstCandidate first; -1 if it is not
// one of them.
func (fo *failover) campaignRank(failed string) int {
	servers, err := fo.core.Servers()
	if err != nil {
		return -1
	}
	var voters []string
	for id, voter := range servers {
		if voter && id != failed {
			voters = append(voters, id)
		}
	}
	slices.Sort(voters)
	if i := slices.Index(voters, fo.core.cfg.FirstCandidate); i > 0 {
		// The member that led before the group hibernated goes first
		// (Config.FirstCandidate); the others keep their order.
		voters = slices.Insert(slices.Delete(voters, i, i+1), 0, fo.core.cfg.FirstCandidate)
	}
	return slices.Index(voters, fo.core.cfg.NodeID)
}

// suspectPoll bounds how long awaitLeader sleeps between looks.
const suspectPoll = 100 * time.Millisecond

// awaitLeader waits until the group has a leader other than one on node
// ("" when none is known), or four heartbeat timeouts have passed. When
// this member's rank comes it campaigns (a failed or restarted leader) or, after a
// start, asks whether a majority would vote for it and campaigns if so,
// asking again later while nobody leads.
func (fo *failover) awaitLeader(node string, why suspicion, grace time.Duration) {
	defer fo.suspecting.Store(false)
	s := &leaderSearch{node: node, started: why == noLeader}
	start := time.Now()
	deadline := start.Add(grace + 4*fo.base.HeartbeatTimeout)
	rank := fo.campaignRank(node)
	if rank < 0 {
		return // not a voter: it cannot lead
	}
	rankWait := time.Duration(rank) * campaignStagger
	s.stagger = rankWait
	s.next = start.Add(grace + s.stagger)
	if !s.started {
		// The rank's wait comes once the others agree the leader's
		// node failed (below): they all learn it from the same gossip,
		// and waits counted from the start would line up the ranks'
		// first campaigns after a disagreement and split the vote.
		s.next = start.Add(grace)
	}
	s.agreed = why == leaderRestarted
	s.termAtStart = raftStats(fo.core.raft)("term")
	s.gap = askGapFirst
	if !s.started {
		// Agreement is asked again soon, so that the ranks' campaigns
		// stay campaignStagger apart: each counts its wait from when it
		// saw agreement, and the first rank asking half a second late
		// would campaign with the second.
		s.gap = suspectPoll
	}
	for {
		state := fo.core.raft.State()
		_, id := fo.core.raft.LeaderWithID()
		switch {
		case state == raft.Shutdown:
			return
		case state == raft.Leader, id != "" && string(id) != node:
			fo.core.log.Debug("leader found", "failed", node, "leader", string(id))
			return
		case node != "" && string(id) == node && fo.core.raft.LastContact().After(start):
			// Heard from the leader after gossip called its node
			// failed: it is not (this node was cut off, or gossip
			// wrong).
			fo.core.log.Debug("the suspected leader is alive", "leader", node)
			return
		case time.Now().After(deadline):
			fo.core.log.Debug("no leader found; raft's timeout elects", "failed", node)
			return
		}
		now := time.Now()
		if state != raft.Candidate {
			s.candidateSince = time.Time{}
		} else if s.candidateSince.IsZero() {
			s.candidateSince = now
		}
		// A candidacy still open after candidateStall (and the rank's
		// wait, so that split candidates restart apart) was refused or
		// lost its answers, and raft would not try again for 30 s or more:
		// ask, as after a start, and campaign again above it.
		stalled := state == raft.Candidate && now.Sub(s.candidateSince) >= candidateStall+rankWait
		if stalled && !s.started {
			s.started, s.gap = true, askGapFirst
		}
		if (state == raft.Follower || stalled) && !now.Before(s.next) {
			if fo.decide(s, stalled) {
				return
			}
		}
		wait := min(suspectPoll, max(time.Until(s.next), time.Millisecond))
		select {
		case <-fo.core.done:
			return
		case <-time.After(wait):
		}
	}
}

// leaderSearch is where one awaitLeader stands: whom it suspects, and
// how far this member has come in asking, waiting its rank and
// campaigning.
type leaderSearch struct {
	// node is the suspected leader's node; "" after a start, or when
	// the group lost its leader otherwise.
	node string
	// started: asking as after a start, whether a majority would vote
	// for this member, rather than about a failed or restarted leader.
	started bool
	// agreed: a majority of the voters see the leader's node failed
	// (majorityAgreesFailed), or it restarted, which its new boot shows
	// to everyone.
	agreed bool
	// stagger is the rank's wait still to come once they agree.
	stagger time.Duration
	// next is when the next step is due, and gap how long after that
	// the one after it comes, growing while nobody leads.
	next time.Time
	gap  time.Duration
	// termAtStart tells whether an election has been held since the
	// suspicion began (electedSince).
	termAtStart uint64
	// candidateSince is when this member was first seen a candidate in
	// its current candidacy, or last campaigned (a restart's moment as a
	// follower is too short for the loop to see).
	candidateSince time.Time
}

// decide takes this member's next step in search s once its time has
// come: ask whether the others agree the leader's node failed, wait out
// its rank, campaign, or ask again later. stop: the suspected leader
// answers that it leads, so the search is over.
func (fo *failover) decide(s *leaderSearch, stalled bool) (stop bool) {
	if !s.started && !s.agreed {
		s.agreed = fo.majorityAgreesFailed(s.node)
	}
	switch {
	case !s.started && s.agreed && s.stagger > 0:
		// Agreed: this rank's wait, then campaign if still
		// nobody leads.
		s.next = time.Now().Add(s.stagger)
		s.stagger = 0
	case !s.started && s.agreed && fo.leaderAnswers(s.node):
		fo.core.log.Debug("the suspected leader answers that it leads", "leader", s.node)
		return true
	case !s.started && s.agreed && fo.electedSince(s.node, s.termAtStart):
		// The questions above take up to a second each, and
		// another member may have campaigned meanwhile: a
		// campaign now would depose a leader just elected (the
		// chaos harness saw a queue leaderless for 2 s that
		// way). Ask as after a start, which a leader refuses.
		fo.core.log.Debug("not campaigning: an election was held since the leader's node failed", "failed", s.node)
		s.started = true
		s.next = time.Now().Add(leaderLostGrace)
		s.gap = askGapFirst
	case !s.started && s.agreed:
		fo.core.log.Debug("campaigning: the leader's node failed", "failed", s.node)
		go func() {
			// The voters believe in the old leader and refuse a
			// pre-vote, but their answers still tell their terms.
			_, seen := fo.preVoteQuorum(preVoteWait, anyAnswer)
			fo.campaignAbove("the leader's node failed", seen)
		}()
		s.candidateSince = time.Now()
		// Once. Should it fail, or a rival that cannot win depose
		// it with a higher term before this loop sees it lead,
		// nobody would campaign until raft's own timeout (the
		// rival's leaderLost waits behind this loop): ask as after
		// a start, from leaderLostGrace on.
		s.started = true
		s.next = time.Now().Add(leaderLostGrace)
		s.gap = askGapFirst
	case !s.started:
		// The others' gossip still sees the leader's node (or
		// they do not answer: this member is cut off). Ask again,
		// less and less often: their gossip may not have heard.
		fo.core.log.Debug("not campaigning: most voters do not see the leader's node failed", "failed", s.node)
		s.next = time.Now().Add(s.gap)
		s.gap = min(2*s.gap, askGapMax)
	default:
		// A drained member leaves the election to the others.
		if !fo.isDrained() {
			if yes, seen := fo.majorityWouldVote(); yes {
				fo.core.log.Debug("campaigning: no leader after start", "stalled", stalled)
				go fo.campaignAbove("no leader after start", seen)
				s.candidateSince = time.Now()
			}
		}
		s.next = time.Now().Add(s.gap)
		s.gap = min(2*s.gap, askGapMax)
	}
	return false
}

// electedSince reports whether this member has heard of a leader other
// than one on node, or moved past term, its term when the suspicion of
// node began: some member campaigned since (a campaign raises the
// voters' terms whether it wins or not).
func (fo *failover) electedSince(node string, term uint64) bool {
	if _, id := fo.core.raft.LeaderWithID(); id != "" && string(id) != node {
		return true
	}
	return raftStats(fo.core.raft)("term") > term
}

// majorityWouldVote asks the group's other voters whether they would
// grant this member a vote at the next term (raft's pre-vote question,
// which changes nothing on the voter) and reports whether a majority of
// the voters, this member included, would; seen is the highest term in
// the answers (campaignAbove).
func (fo *failover) majorityWouldVote() (yes bool, seen uint64) {
	return fo.preVoteQuorum(preVoteWait, func(resp *raft.RequestPreVoteResponse) bool { return resp.Granted })
}

// majorityAgreesFailed reports whether a majority of the group's voters,
// this member included, see the leader's node failed: their nodes'
// gossip does (Config.SeesAlive), or, without that question, they at
// least answer a pre-vote. A member cut off from the others by a partition
// hears its own gossip call every other node failed and must not campaign
// on that word alone: its election would fail, and its higher term would
// depose the live leader the moment the partition healed (and its gossip
// may call the leader failed just after the heal, when everyone answers
// again). The survivors of a real failure agree within a gossip round or
// two; until their own timeout they still believe in the old leader and
// would refuse a pre-vote.
func (fo *failover) majorityAgreesFailed(node string) bool {
	if fo.core.cfg.SeesAlive == nil {
		yes, _ := fo.preVoteQuorum(preVoteWait, anyAnswer)
		return yes
	}
	return fo.voterQuorum(preVoteWait, node, func(ctx context.Context, s raft.Server) bool {
		alive, err := fo.core.cfg.SeesAlive(ctx, string(s.ID), node)
		return err == nil && !alive
	})
}

// leaderAnswers asks the suspected leader's node itself whether its
// member still leads the group (Config.LeadsAt), the last word before a
// campaign that skips pre-vote. The majority's gossip can be wrong about
// a live leader for a moment: a node whose partition just healed pushes
// its view that every other node failed to the others, and a survivor
// that cannot get the leader's refutation in time (a loaded machine)
// declares it failed too. A campaign then would depose a leader that
// lost nothing. A leader that is really gone does not answer: a killed
// process's node refuses the connection at once, a lost host or a
// partition costs preVoteWait.
func (fo *failover) leaderAnswers(node string) bool {
	if fo.core.cfg.LeadsAt == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), preVoteWait)
	defer cancel()
	leads, err := fo.core.cfg.LeadsAt(ctx, node)
	return err == nil && leads
}

// preVoteWait bounds how long a round of questions waits for a majority:
// a partitioned or stopped peer's call hangs until the transport gives up.
const preVoteWait = time.Second

// preVoteQuorum asks the group's other voters raft's pre-vote question
// for this member and reports whether a majority of the voters, this
// member included, gave an answer that ok accepts within wait, and the
// highest term among the answers it got.
func (fo *failover) preVoteQuorum(wait time.Duration, ok func(*raft.RequestPreVoteResponse) bool) (yes bool, seen uint64) {
	pv, isPV := fo.core.cfg.Transport.(raft.WithPreVote)
	if !isPV {
		return false, 0
	}
	req := fo.preVoteRequest()
	var high atomic.Uint64
	yes = fo.voterQuorum(wait, "", func(_ context.Context, s raft.Server) bool {
		var resp raft.RequestPreVoteResponse
		if err := pv.RequestPreVote(s.ID, s.Address, req, &resp); err != nil {
			return false
		}
		for cur := high.Load(); resp.Term > cur && !high.CompareAndSwap(cur, resp.Term); cur = high.Load() {
		}
		return ok(&resp)
	})
	return yes, high.Load()
}

// anyAnswer accepts every pre-vote answer: the question is only whether
// the voter answers, and at which term.
func anyAnswer(*raft.RequestPreVoteResponse) bool { return true }

// voterQuorum asks each of the group's voters other than this member and
// skip, at once, and reports whether a majority of all the voters, this
// member counted as yes, answered yes within wait. It returns as soon as
// that majority is reached. This member must be a voter.
func (fo *failover) voterQuorum(wait time.Duration, skip string, ask func(context.Context, raft.Server) bool) bool {
	f := fo.core.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	voters, self, asked := 0, false, 0
	answers := make(chan bool, len(f.Configuration().Servers))
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		switch string(s.ID) {
		case fo.core.cfg.NodeID:
			self = true
		case skip:
		default:
			asked++
			go func() { answers <- ask(ctx, s) }()
		}
	}
	if !self {
		return false // not a voter: it cannot lead
	}
	need, yes := voters/2+1, 1
	for ; yes < need && asked > 0; asked-- {
		select {
		case a := <-answers:
			if a {
				yes++
			}
		case <-ctx.Done():
			return false
		case <-fo.core.done:
			return false
		}
	}
	return yes >= need
}

// preVoteRequest is the pre-vote request raft itself would send: the next
// term and this member's last entry, its snapshot's if that is later.
func (fo *failover) preVoteRequest() *raft.RequestPreVoteRequest {
	num := raftStats(fo.core.raft)
	idx, term := num("last_log_index"), num("last_log_term")
	if si := num("last_snapshot_index"); si > idx {
		idx, term = si, num("last_snapshot_term")
	}
	return &raft.RequestPreVoteRequest{
		RPCHeader: raft.RPCHeader{
			ProtocolVersion: raft.ProtocolVersionMax,
			ID:              []byte(fo.core.cfg.NodeID),
			Addr:            []byte(fo.core.cfg.Transport.LocalAddr()),
		},
		Term:         num("term") + 1,
		LastLogIndex: idx,
		LastLogTerm:  term,
	}
}

// campaigner is a transport that can make this member campaign at once
// (cluster/transport's Transport.Campaign).
type campaigner interface {
	Campaign(ctx context.Context) error
}

// campaign starts the first election of a group this member has just
// bootstrapped, instead of waiting a heartbeat timeout for it: the other
// members start empty, so there is no leader to disturb.
func (fo *failover) campaign() {
	if _, id := fo.core.raft.LeaderWithID(); id != "" || fo.core.raft.State() != raft.Follower {
		return
	}
	fo.campaignNow("first election")
}

// termRaiser is a transport that can make this member adopt a higher
// term (cluster/transport's Transport.RaiseTerm).
type termRaiser interface {
	RaiseTerm(ctx context.Context, id string, term uint64) error
}

// campaignAbove makes this member campaign at a term above seen, the
// highest term the voters answered a pre-vote with, and above its own
// candidacy if it is stuck in one. raft campaigns at its current term
// plus one, and its current term can be behind the voters': a leader that
// steps down because a follower answered with a higher term keeps its
// own (raft's handleStaleTerm), and a member cut off while the others
// campaigned never heard their terms. The voters may have voted at that
// term plus one already (for themselves, in a split vote); they refuse a
// second candidate there, and a refused candidate waits out raft's
// election timeout, 30 to 60 s for queue groups, before it tries again.
// The chaos harness saw exactly that: a deposed leader, told by the
// pre-vote that both others would vote for it, campaigned at the term
// they had split their votes in, and the queue had no leader for 33 s.
func (fo *failover) campaignAbove(why string, seen uint64) {
	term := raftStats(fo.core.raft)("term")
	switch state := fo.core.raft.State(); {
	case state == raft.Candidate:
		fo.raiseTerm(max(seen, term+1)) // steps down, so that it can campaign again
	case state == raft.Follower && seen > term:
		fo.raiseTerm(seen)
	case state != raft.Follower:
		return // leads, or shut down
	}
	fo.campaignNow(why)
}

// raiseTerm makes this member adopt term, voting for nobody.
func (fo *failover) raiseTerm(term uint64) {
	tr, ok := fo.core.cfg.Transport.(termRaiser)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.RaiseTerm(ctx, fo.core.cfg.NodeID, term); err != nil {
		fo.core.log.Debug("raise term", "term", term, "err", err)
	}
}

// campaignNow makes this member start an election at once, as a
// leadership transfer's TimeoutNow would; why is for the log.
func (fo *failover) campaignNow(why string) {
	c, ok := fo.core.cfg.Transport.(campaigner)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-fo.core.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := c.Campaign(ctx); err != nil {
		fo.core.log.Debug("campaign", "why", why, "err", err)
	}
}
