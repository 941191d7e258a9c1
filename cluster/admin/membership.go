package admin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Membership operations: which nodes hold a quorum queue's replicas, as
// rabbitmq-queues add_member, delete_member, grow and shrink. The node
// drives each change with the queue's leader and answers once it is
// committed (an added member once it votes).

// How a new member joins, as rabbitmq-queues add_member, grow and
// grow_to_count's --membership.
const (
	// Promotable: a non-voter, which the quorum does not count, until it
	// has caught up with the leader; then a voter. The default.
	Promotable = "promotable"
	// Voter: a voter as soon as its replica exists, counted in the
	// quorum while it catches up.
	Voter = "voter"
)

// membershipOf checks a request's membership, empty meaning Promotable.
// RabbitMQ also takes non_voter, a member never promoted; Warren's
// members always end up voters, and says so.
func membershipOf(m string) (string, error) {
	switch m {
	case "", Promotable:
		return Promotable, nil
	case Voter:
		return Voter, nil
	case "non_voter":
		return "", status.Error(codes.InvalidArgument, "membership non_voter is not supported: a member always becomes a voter (promotable, the default, once it has caught up; voter at once)")
	}
	return "", status.Errorf(codes.InvalidArgument, "voter status '%s' is not recognised (promotable or voter)", m)
}

func (s *Server) AddMember(ctx context.Context, req *adminpb.AddMemberRequest) (*adminpb.MembershipResponse, error) {
	if req.Vhost == "" {
		req.Vhost = "/"
	}
	membership, err := membershipOf(req.Membership)
	if err != nil {
		return nil, err
	}
	if err := s.b.AddMember(ctx, req.Vhost, req.Name, req.Node, membership); err != nil {
		return nil, membershipError(err)
	}
	return &adminpb.MembershipResponse{Changed: []string{req.Vhost + "/" + req.Name}}, nil
}

func (s *Server) DeleteMember(ctx context.Context, req *adminpb.DeleteMemberRequest) (*adminpb.MembershipResponse, error) {
	if req.Vhost == "" {
		req.Vhost = "/"
	}
	if err := s.b.DeleteMember(ctx, req.Vhost, req.Name, req.Node, req.Force); err != nil {
		return nil, membershipError(err)
	}
	return &adminpb.MembershipResponse{Changed: []string{req.Vhost + "/" + req.Name}}, nil
}

func (s *Server) Grow(ctx context.Context, req *adminpb.GrowRequest) (*adminpb.MembershipResponse, error) {
	if req.Strategy != "" && req.Strategy != "all" && req.Strategy != "even" {
		return nil, status.Errorf(codes.InvalidArgument, "strategy '%s' is not recognised (all or even)", req.Strategy)
	}
	membership, err := membershipOf(req.Membership)
	if err != nil {
		return nil, err
	}
	if req.Count > 0 {
		return s.growToCount(ctx, req, membership)
	}
	changed, err := s.b.Grow(ctx, req.Node, req.VhostPattern, req.QueuePattern, req.Strategy, membership)
	return manyChanged(changed, err)
}

// GrowToCountBackend is what a Backend offers for growing quorum queues to
// a number of members (rabbitmq-queues grow_to_count). A Backend without
// it answers Unimplemented.
type GrowToCountBackend interface {
	// GrowToCount adds members to every matching quorum queue that
	// strategy ("", all or even) selects until it has count, on the
	// nodes it picks, joining as membership says; it returns the members
	// added and, joined, the errors of the queues that could not grow.
	GrowToCount(ctx context.Context, count int, vhostPattern, queuePattern, strategy, membership string) ([]AddedMember, error)
}

// AddedMember is a member GrowToCount added: queue "vhost/name" on node.
type AddedMember struct {
	Queue, Node string
}

func (s *Server) growToCount(ctx context.Context, req *adminpb.GrowRequest, membership string) (*adminpb.MembershipResponse, error) {
	gb, err := optional[GrowToCountBackend](s, "growing queues to a count is")
	if err != nil {
		return nil, err
	}
	if req.Node != "" {
		return nil, status.Error(codes.InvalidArgument, "grow names a node or a count, not both")
	}
	added, err := gb.GrowToCount(ctx, int(req.Count), req.VhostPattern, req.QueuePattern, req.Strategy, membership)
	var changed []string
	for _, a := range added {
		changed = append(changed, a.Queue)
	}
	resp, err := manyChanged(changed, err)
	if resp != nil {
		for _, a := range added {
			resp.AddedOn = append(resp.AddedOn, a.Node)
		}
	}
	return resp, err
}

func (s *Server) Shrink(ctx context.Context, req *adminpb.ShrinkRequest) (*adminpb.MembershipResponse, error) {
	changed, err := s.b.Shrink(ctx, req.Node)
	return manyChanged(changed, err)
}

// manyChanged reports a grow or shrink: what changed and, queue by queue,
// what could not; a failure before any queue (a bad pattern) is the
// call's error.
func manyChanged(changed []string, err error) (*adminpb.MembershipResponse, error) {
	resp := &adminpb.MembershipResponse{Changed: changed}
	if err == nil {
		return resp, nil
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		return nil, membershipError(err)
	}
	for _, e := range joined.Unwrap() {
		resp.Failed = append(resp.Failed, e.Error())
	}
	return resp, nil
}

func membershipError(err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrNotQuorum), errors.Is(err, ErrRefused):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Aborted, err.Error())
}
