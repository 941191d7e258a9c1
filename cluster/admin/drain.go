package admin

import (
	"context"
	"errors"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/proto/adminpb"
)

// Maintenance mode and forgetting nodes. Drain commits the drained state
// (every node's placement then leaves the node out), asks the node to
// carry it out (MemberMaintenance: its listener, its connections, its
// replicas' timeouts), moves every leadership off it with the transfer
// path Rebalance uses (move), and asks it once more, so that the replicas
// that led when it was first asked now follow with raised timeouts.

// MaintenanceBackend is what a Backend offers for maintenance mode and
// forgetting nodes. A Backend without it answers Unimplemented.
type MaintenanceBackend interface {
	// SetDraining commits node's maintenance state; it may wait for the
	// metadata group's leader.
	SetDraining(node string, draining bool) error
	// Maintain carries out this node's committed maintenance state and
	// returns it, with the client connections it closed.
	// The caller committed draining: Maintain first waits for this
	// node's copy of the metadata to show it.
	Maintain(ctx context.Context, draining bool) (state bool, closed int, err error)
	// ForgetServer removes node from the metadata group (and its
	// maintenance record).
	ForgetServer(ctx context.Context, node string) error
}

// maxDrainRounds bounds how often Drain surveys and moves leaderships
// that came back or failed to move.
const maxDrainRounds = 5

func (s *Server) maintenance() (MaintenanceBackend, error) {
	mb, ok := s.b.(MaintenanceBackend)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "maintenance mode is not available on this node")
	}
	return mb, nil
}

// knownNode refuses a node the cluster does not know.
func (s *Server) knownNode(node string) error {
	if node == "" {
		return status.Error(codes.InvalidArgument, "a node name is required")
	}
	if node != s.b.Self() && !slices.ContainsFunc(s.b.Nodes(), func(n NodeInfo) bool { return n.Name == node }) {
		return status.Errorf(codes.NotFound, "node '%s' is not a cluster member", node)
	}
	return nil
}

// Drain implements adminpb.AdminServer.
func (s *Server) Drain(ctx context.Context, req *adminpb.DrainRequest) (*adminpb.DrainResponse, error) {
	mb, err := s.maintenance()
	if err != nil {
		return nil, err
	}
	if err := s.knownNode(req.Node); err != nil {
		return nil, err
	}
	if !s.alive()[req.Node] {
		return nil, status.Errorf(codes.FailedPrecondition, "node '%s' is not alive", req.Node)
	}
	if err := mb.SetDraining(req.Node, true); err != nil {
		return nil, status.Errorf(codes.Unavailable, "record node '%s' as drained: %v", req.Node, err)
	}
	resp := &adminpb.DrainResponse{Node: req.Node}
	closed, err := s.maintainAt(ctx, req.Node, true)
	if err != nil {
		return nil, status.Errorf(codes.Aborted, "node '%s' is recorded as drained but did not carry it out: %v", req.Node, err)
	}
	resp.ConnectionsClosed = closed
	resp.Moves, resp.StillLeading = s.moveLeadersOff(ctx, req.Node)
	if _, err := s.maintainAt(ctx, req.Node, true); err != nil {
		return nil, status.Errorf(codes.Aborted, "node '%s': %v", req.Node, err)
	}
	s.log.Info("node drained", "node", req.Node, "moves", len(resp.Moves), "connections_closed", closed, "still_leading", len(resp.StillLeading))
	if len(resp.StillLeading) > 0 {
		return resp, status.Errorf(codes.Aborted, "node '%s' is drained but still leads %v", req.Node, resp.StillLeading)
	}
	return resp, nil
}

// Undrain implements adminpb.AdminServer.
func (s *Server) Undrain(ctx context.Context, req *adminpb.DrainRequest) (*adminpb.DrainResponse, error) {
	mb, err := s.maintenance()
	if err != nil {
		return nil, err
	}
	if err := s.knownNode(req.Node); err != nil {
		return nil, err
	}
	if err := mb.SetDraining(req.Node, false); err != nil {
		return nil, status.Errorf(codes.Unavailable, "record node '%s' as in service: %v", req.Node, err)
	}
	if s.alive()[req.Node] {
		if _, err := s.maintainAt(ctx, req.Node, false); err != nil {
			return nil, status.Errorf(codes.Aborted, "node '%s' is recorded as in service but did not resume: %v", req.Node, err)
		}
	}
	s.log.Info("node undrained", "node", req.Node)
	return &adminpb.DrainResponse{Node: req.Node}, nil
}

// MemberMaintenance implements adminpb.AdminServer.
func (s *Server) MemberMaintenance(ctx context.Context, req *adminpb.MemberMaintenanceRequest) (*adminpb.MemberMaintenanceResponse, error) {
	mb, err := s.maintenance()
	if err != nil {
		return nil, err
	}
	draining, closed, err := mb.Maintain(ctx, req.Draining)
	if err != nil {
		return nil, status.Errorf(codes.Aborted, "%v", err)
	}
	return &adminpb.MemberMaintenanceResponse{Draining: draining, ConnectionsClosed: uint32(closed)}, nil
}

// maintainAt asks node to carry out its maintenance state: this node
// without a call.
func (s *Server) maintainAt(ctx context.Context, node string, draining bool) (uint32, error) {
	req := &adminpb.MemberMaintenanceRequest{Draining: draining}
	if node == s.b.Self() {
		resp, err := s.MemberMaintenance(ctx, req)
		if err != nil {
			return 0, errors.New(status.Convert(err).Message())
		}
		return resp.ConnectionsClosed, nil
	}
	c, _, err := s.peer(node)
	if err != nil {
		return 0, err
	}
	resp, err := c.MemberMaintenance(ctx, req)
	if err != nil {
		return 0, errors.New(status.Convert(err).Message())
	}
	return resp.ConnectionsClosed, nil
}

// moveLeadersOff moves the leadership of every quorum queue node leads to
// the follower (a voter on an alive node that is not drained) leading the
// fewest, as Rebalance picks, surveying again until node leads nothing or
// maxDrainRounds. It returns the moves and the queues node still leads.
func (s *Server) moveLeadersOff(ctx context.Context, node string) (moves []*adminpb.LeaderMove, still []string) {
	drained := map[string]bool{}
	for _, n := range s.b.Nodes() {
		drained[n.Name] = n.Draining
	}
	drained[node] = true
	for round := 0; round < maxDrainRounds && ctx.Err() == nil; round++ {
		groups := s.groups(func(string, string) bool { return true })
		survey := s.replicas(ctx)
		counts := map[string]int{}
		var leading []group
		for _, g := range groups {
			leader, _ := g.view(survey)
			counts[leader]++
			if leader == node {
				leading = append(leading, g)
			}
		}
		still = still[:0]
		if len(leading) == 0 {
			return moves, nil
		}
		for _, g := range leading {
			// The follower leading fewest, one caught up if there is
			// one: a transfer to one behind holds the queue's writes
			// until it has caught up (see caughtUp).
			to, toUp := "", false
			for _, m := range g.members {
				view, ok := survey[m][g.id]
				if !ok || m == node || drained[m] || view.Role != string(RoleFollower) {
					continue
				}
				up := caughtUp(survey[node][g.id], view)
				if to == "" || (up && !toUp) || (up == toUp && counts[m] < counts[to]) {
					to, toUp = m, up
				}
			}
			ref := g.vhost + "/" + g.name
			if to == "" {
				still = append(still, ref)
				continue
			}
			move := &adminpb.LeaderMove{Vhost: g.vhost, Name: g.name, From: node, To: to}
			if err := s.move(ctx, g.id, node, to); err != nil && !errors.Is(err, errMoved) {
				move.Error = err.Error()
				still = append(still, ref)
				s.log.Warn("drain: leadership transfer failed", "vhost", g.vhost, "queue", g.name, "to", to, "err", err)
			} else {
				counts[node]--
				counts[to]++
			}
			moves = append(moves, move)
		}
		if len(still) > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return moves, still
}

// ForgetNode implements adminpb.AdminServer: the node must be known and
// not alive; each quorum queue it is a member of loses it (forced: the
// node's replica is gone for good), then the metadata group does.
func (s *Server) ForgetNode(ctx context.Context, req *adminpb.ForgetNodeRequest) (*adminpb.MembershipResponse, error) {
	mb, err := s.maintenance()
	if err != nil {
		return nil, err
	}
	if err := s.knownNode(req.Node); err != nil {
		return nil, err
	}
	if req.Node == s.b.Self() {
		return nil, status.Errorf(codes.FailedPrecondition, "node '%s' cannot forget itself: ask another node", req.Node)
	}
	for _, n := range s.b.Nodes() {
		if n.Name == req.Node && n.State != membership.Dead && n.State != membership.Left {
			return nil, status.Errorf(codes.FailedPrecondition, "node '%s' is %s: stop it before forgetting it", req.Node, n.State)
		}
	}
	resp := &adminpb.MembershipResponse{}
	for _, g := range s.groups(func(string, string) bool { return true }) {
		if !slices.Contains(g.members, req.Node) {
			continue
		}
		ref := g.vhost + "/" + g.name
		if err := s.b.DeleteMember(ctx, g.vhost, g.name, req.Node, true); err != nil {
			resp.Failed = append(resp.Failed, ref+": "+err.Error())
			continue
		}
		resp.Changed = append(resp.Changed, ref)
	}
	if len(resp.Failed) > 0 {
		return resp, status.Errorf(codes.Aborted, "node '%s' is still a member of %d queue(s); not removed from the cluster: %v",
			req.Node, len(resp.Failed), resp.Failed)
	}
	if err := mb.ForgetServer(ctx, req.Node); err != nil {
		return resp, status.Errorf(codes.Unavailable, "remove node '%s' from the metadata group: %v", req.Node, err)
	}
	s.log.Info("node forgotten", "node", req.Node, "queues", len(resp.Changed))
	return resp, nil
}
