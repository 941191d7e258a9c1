package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/proto/adminpb"
)

// Leadership operations: moving one queue's leader, rebalancing leaders,
// and the health checks that read every replica's role. The asked node
// finds each group's leader by asking the members' nodes (MemberStatus,
// or LocalMembers once per node), and asks the leader's node to transfer
// (MemberTransferLeadership), which calls Raft's
// LeadershipTransferToServer: only the leader can.

// maxTakeover bounds how long a transfer waits, after the old leader has
// stepped down, for the target to report itself leader.
const maxTakeover = 15 * time.Second

// errMoved is transferAt's error when the asked replica no longer leads:
// look for the leader again.
var errMoved = errors.New("leadership moved meanwhile")

// TransferLeadership implements adminpb.AdminServer.
func (s *Server) TransferLeadership(ctx context.Context, req *adminpb.TransferLeadershipRequest) (*adminpb.TransferLeadershipResponse, error) {
	if req.Vhost == "" {
		req.Vhost = "/"
	}
	id, members, err := s.b.QueueGroup(req.Vhost, req.Name)
	if err != nil {
		return nil, queueError(err, req.Vhost, req.Name)
	}
	if !slices.Contains(members, req.To) {
		return nil, status.Errorf(codes.InvalidArgument, "node '%s' is not a member of queue '%s' in vhost '%s' (members: %v)",
			req.To, req.Name, req.Vhost, members)
	}
	if !s.alive()[req.To] {
		return nil, status.Errorf(codes.FailedPrecondition, "node '%s' is not alive", req.To)
	}
	resp := &adminpb.TransferLeadershipResponse{Vhost: req.Vhost, Name: req.Name, To: req.To}
	for attempt := 0; ; attempt++ {
		// A hibernating group elects its old leader on waking.
		from := s.leaderAwake(ctx, id, members)
		if from == "" {
			return nil, status.Errorf(codes.FailedPrecondition, "queue '%s' in vhost '%s' has no leader now", req.Name, req.Vhost)
		}
		resp.From = from
		if from == req.To {
			return resp, nil
		}
		s.awaitCaughtUp(ctx, id, from, req.To)
		err := s.move(ctx, id, from, req.To)
		if errors.Is(err, errMoved) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, status.Errorf(codes.Aborted, "queue '%s' in vhost '%s': leadership transfer from %s to %s: %v",
				req.Name, req.Vhost, from, req.To, err)
		}
		resp.Moved = true
		s.log.Info("transferred queue leadership", "vhost", req.Vhost, "queue", req.Name, "from", from, "to", req.To)
		return resp, nil
	}
}

// MemberTransferLeadership implements adminpb.AdminServer.
func (s *Server) MemberTransferLeadership(ctx context.Context, req *adminpb.MemberTransferLeadershipRequest) (*adminpb.MemberTransferLeadershipResponse, error) {
	err := s.b.TransferLeadership(ctx, req.QueueId, req.To)
	switch {
	case err == nil:
		return &adminpb.MemberTransferLeadershipResponse{}, nil
	case errors.Is(err, ErrNotFound):
		return nil, status.Errorf(codes.NotFound, "no replica of %s on %s", req.QueueId, s.b.Self())
	case errors.Is(err, ErrNotLeader):
		return nil, status.Errorf(codes.FailedPrecondition, "the replica of %s on %s does not lead", req.QueueId, s.b.Self())
	}
	return nil, status.Errorf(codes.Aborted, "%v", err)
}

// LocalMembers implements adminpb.AdminServer.
func (s *Server) LocalMembers(context.Context, *adminpb.LocalMembersRequest) (*adminpb.LocalMembersResponse, error) {
	resp := &adminpb.LocalMembersResponse{Node: s.b.Self()}
	for id, st := range s.b.LocalMembers() {
		resp.Members = append(resp.Members, &adminpb.LocalMember{QueueId: id, Member: memberPB(s.b.Self(), st)})
	}
	slices.SortFunc(resp.Members, func(a, b *adminpb.LocalMember) int { return cmp.Compare(a.QueueId, b.QueueId) })
	return resp, nil
}

// maxCatchUpWait bounds how long a transfer waits for its target to catch
// up before asking Raft to transfer anyway.
const maxCatchUpWait = 10 * time.Second

// awaitCaughtUp waits, at most maxCatchUpWait, until member to of group id
// has caught up with leader (caughtUp). Raft's transfer would bring it up
// to date itself, but its leader refuses writes all the while; waiting
// here first keeps the queue's publishers going.
func (s *Server) awaitCaughtUp(ctx context.Context, id, leader, to string) {
	wait, cancel := context.WithTimeout(ctx, maxCatchUpWait)
	defer cancel()
	for {
		var l, f *adminpb.Member
		var wg sync.WaitGroup
		wg.Go(func() { l = s.askMember(wait, id, leader) })
		wg.Go(func() { f = s.askMember(wait, id, to) })
		wg.Wait()
		if caughtUp(l, f) || l.Role != string(RoleLeader) {
			return
		}
		select {
		case <-wait.Done():
			s.log.Info("transfer target still behind its leader; transferring anyway", "queue", id, "leader", leader, "to", to,
				"leader_commit", l.CommitIndex, "target_last_log", f.LastLogIndex)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// move asks leader's node to hand group id's leadership to member to,
// then waits until to reports itself leader.
func (s *Server) move(ctx context.Context, id, leader, to string) error {
	if err := s.transferAt(ctx, id, leader, to); err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, maxTakeover)
	defer cancel()
	for {
		m := s.askMember(wait, id, to)
		if m.Role == string(RoleLeader) {
			return nil
		}
		select {
		case <-wait.Done():
			return fmt.Errorf("%s stepped down but %s does not lead (%s)", leader, to, m.Role)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// transferAt runs the transfer on the leader's node: this one without a
// call.
func (s *Server) transferAt(ctx context.Context, id, leader, to string) error {
	if leader == s.b.Self() {
		err := s.b.TransferLeadership(ctx, id, to)
		if errors.Is(err, ErrNotLeader) {
			return errMoved
		}
		return err
	}
	c, _, err := s.peer(leader)
	if err != nil {
		return err
	}
	_, err = c.MemberTransferLeadership(ctx, &adminpb.MemberTransferLeadershipRequest{QueueId: id, To: to})
	if status.Code(err) == codes.FailedPrecondition {
		return errMoved
	}
	if err != nil {
		return errors.New(status.Convert(err).Message())
	}
	return nil
}

// findLeader asks every member at once and returns the one that reports
// itself leader at the highest term; "" if none does.
func (s *Server) findLeader(ctx context.Context, id string, members []string) string {
	views := make([]*adminpb.Member, len(members))
	var wg sync.WaitGroup
	for i, node := range members {
		wg.Go(func() { views[i] = s.askMember(ctx, id, node) })
	}
	wg.Wait()
	var leader *adminpb.Member
	for _, m := range views {
		if m.Role == string(RoleLeader) && (leader == nil || m.Term > leader.Term) {
			leader = m
		}
	}
	if leader == nil {
		return ""
	}
	return leader.Node
}

// alive is the set of nodes gossip sees alive (and not leaving).
func (s *Server) alive() map[string]bool {
	alive := map[string]bool{}
	for _, n := range s.b.Nodes() {
		if n.State == membership.Alive && !n.Leaving {
			alive[n.Name] = true
		}
	}
	alive[s.b.Self()] = true
	return alive
}

// replicas is each alive node's replicas, by node then queue ID, asked of
// every alive node at once (this one without a call). A node that does not
// answer is left out, as if it were down.
func (s *Server) replicas(ctx context.Context) map[string]map[string]*adminpb.Member {
	var (
		mu  sync.Mutex
		out = map[string]map[string]*adminpb.Member{}
		wg  sync.WaitGroup
	)
	for node := range s.alive() {
		wg.Go(func() {
			ms, err := s.askLocalMembers(ctx, node)
			if err != nil {
				s.log.Debug("local members: node unreachable", "node", node, "err", err)
				return
			}
			mu.Lock()
			out[node] = ms
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func (s *Server) askLocalMembers(ctx context.Context, node string) (map[string]*adminpb.Member, error) {
	resp, err := onNode(ctx, s, node, &adminpb.LocalMembersRequest{}, (*Server).LocalMembers, adminpb.AdminClient.LocalMembers)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*adminpb.Member, len(resp.Members))
	for _, m := range resp.Members {
		if m.Member != nil {
			out[m.QueueId] = m.Member
		}
	}
	return out, nil
}

// group is a quorum queue and its Raft group.
type group struct {
	vhost, name, id string
	members         []string
}

// groups are the quorum queues this node knows of that keep says to, by
// vhost then name.
func (s *Server) groups(keep func(vhost, name string) bool) []group {
	var out []group
	for _, q := range s.b.Queues("", false) {
		if q.Type != "quorum" || !keep(q.Vhost, q.Name) {
			continue
		}
		id, members, err := s.b.QueueGroup(q.Vhost, q.Name)
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, group{vhost: q.Vhost, name: q.Name, id: id, members: members})
	}
	slices.SortFunc(out, func(a, b group) int { return cmp.Or(cmp.Compare(a.vhost, b.vhost), cmp.Compare(a.name, b.name)) })
	return out
}

// view is what the survey says of group g: the member that leads (the
// highest term if several say so; "" if none) and the members whose node
// answered with its replica.
func (g group) view(survey map[string]map[string]*adminpb.Member) (leader string, online []string) {
	var term uint64
	for _, node := range g.members {
		m, ok := survey[node][g.id]
		if !ok {
			continue
		}
		online = append(online, node)
		if m.Role == string(RoleLeader) && (leader == "" || m.Term > term) {
			leader, term = node, m.Term
		}
	}
	return leader, online
}

func (g group) checked(survey map[string]map[string]*adminpb.Member) *adminpb.CheckedQueue {
	leader, online := g.view(survey)
	return &adminpb.CheckedQueue{Vhost: g.vhost, Name: g.name, Members: g.members, OnlineMembers: online, Leader: leader}
}

// CheckQuorumCritical implements adminpb.AdminServer: a queue is critical
// if node is a member and, without it, fewer than a majority of its
// members are online (answering with their replica) now.
func (s *Server) CheckQuorumCritical(ctx context.Context, req *adminpb.CheckQuorumCriticalRequest) (*adminpb.CheckResponse, error) {
	if !slices.ContainsFunc(s.b.Nodes(), func(n NodeInfo) bool { return n.Name == req.Node }) && req.Node != s.b.Self() {
		return nil, status.Errorf(codes.NotFound, "node '%s' is not a cluster member", req.Node)
	}
	groups := s.groups(func(string, string) bool { return true })
	survey := s.replicas(ctx)
	resp := &adminpb.CheckResponse{}
	for _, g := range groups {
		if !slices.Contains(g.members, req.Node) {
			continue
		}
		_, online := g.view(survey)
		left := len(online)
		if slices.Contains(online, req.Node) {
			left--
		}
		if left < len(g.members)/2+1 {
			resp.Queues = append(resp.Queues, g.checked(survey))
		}
	}
	return resp, nil
}

// CheckLeaderless implements adminpb.AdminServer.
func (s *Server) CheckLeaderless(ctx context.Context, req *adminpb.CheckLeaderlessRequest) (*adminpb.CheckResponse, error) {
	groups := s.groups(func(vhost, _ string) bool { return req.Vhost == "" || vhost == req.Vhost })
	survey := s.replicas(ctx)
	resp := &adminpb.CheckResponse{}
	for _, g := range groups {
		if leader, _ := g.view(survey); leader == "" && !g.asleep(survey) {
			resp.Queues = append(resp.Queues, g.checked(survey))
		}
	}
	return resp, nil
}

// CheckReplicasSynced implements adminpb.AdminServer: a replica has
// finished its initial sync once it votes. One still a non-voter is
// catching up before its promotion (add member, grow, the reconciler); one
// the queue's record names that the node has not opened is yet to start.
// A hibernating replica was a voter when it closed.
func (s *Server) CheckReplicasSynced(ctx context.Context, req *adminpb.CheckReplicasSyncedRequest) (*adminpb.CheckResponse, error) {
	if !slices.ContainsFunc(s.b.Nodes(), func(n NodeInfo) bool { return n.Name == req.Node }) && req.Node != s.b.Self() {
		return nil, status.Errorf(codes.NotFound, "node '%s' is not a cluster member", req.Node)
	}
	groups := s.groups(func(string, string) bool { return true })
	local, err := s.askLocalMembers(ctx, req.Node)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "node '%s' did not answer: %s", req.Node, status.Convert(err).Message())
	}
	survey := s.replicas(ctx)
	survey[req.Node] = local
	resp := &adminpb.CheckResponse{}
	for _, g := range groups {
		if !slices.Contains(g.members, req.Node) {
			continue
		}
		m, ok := local[g.id]
		if ok && m.Role != string(RoleNonVoter) && m.Role != string(RoleQuarantined) && m.Role != string(RoleResyncing) {
			continue
		}
		q := g.checked(survey)
		if ok {
			q.ReplicaRole = m.Role
		}
		resp.Queues = append(resp.Queues, q)
	}
	return resp, nil
}

// asleep reports whether group g hibernates: a majority of its members
// answered that their replica is closed while idle, so the group elects
// a leader as soon as it is needed (cluster/node's hibernate.go).
func (g group) asleep(survey map[string]map[string]*adminpb.Member) bool {
	n := 0
	for _, node := range g.members {
		if m, ok := survey[node][g.id]; ok && m.Role == string(RoleAsleep) {
			n++
		}
	}
	return n >= len(g.members)/2+1
}
