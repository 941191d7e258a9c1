package admin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/queue"
)

// Peeking reads a quorum queue's state machine and the message's log
// entry on the leader, as RabbitMQ's peek does (an aux command to the
// leader): a follower may not have applied the last entries yet.

// PeekBackend is what a Backend offers for peeking into a quorum queue.
// A Backend without it answers Unimplemented.
type PeekBackend interface {
	// PeekQueue is the message at position pos among group queueID's
	// ready messages, read on this node's replica, which must lead: the
	// error wraps ErrNotFound if this node holds no replica of the group,
	// ErrNotLeader if it does not lead, ErrNoMessage if fewer messages
	// are ready.
	PeekQueue(queueID string, pos int) (*queue.Message, error)
}

// ErrNoMessage: a quorum queue has no ready message at the position asked.
var ErrNoMessage = errors.New("no message at that position")

// peekPayload is how much of a body peek shows, as rabbitmq-queues peek.
const peekPayload = 64

// Peek implements adminpb.AdminServer.
func (s *Server) Peek(ctx context.Context, req *adminpb.PeekRequest) (*adminpb.PeekResponse, error) {
	if _, err := optional[PeekBackend](s, "peeking into a queue is"); err != nil {
		return nil, err
	}
	if req.Position < 1 {
		return nil, status.Error(codes.InvalidArgument, "position value must be a positive integer")
	}
	if req.Vhost == "" {
		req.Vhost = "/"
	}
	id, members, err := s.b.QueueGroup(req.Vhost, req.Name)
	if errors.Is(err, ErrNotQuorum) {
		return nil, status.Errorf(codes.FailedPrecondition, "cannot peek into queue '%s' in vhost '%s': it is not a quorum queue", req.Name, req.Vhost)
	}
	if err != nil {
		return nil, queueError(err, req.Vhost, req.Name)
	}
	// The leader may move between finding it and asking it: look again.
	for range 3 {
		leader := s.leaderAwake(ctx, id, members)
		if leader == "" {
			return nil, status.Errorf(codes.FailedPrecondition, "queue '%s' in vhost '%s' has no leader now", req.Name, req.Vhost)
		}
		resp, err := onNode(ctx, s, leader, &adminpb.MemberPeekRequest{QueueId: id, Position: req.Position},
			(*Server).MemberPeek, adminpb.AdminClient.MemberPeek)
		switch status.Code(err) {
		case codes.OK:
			resp.Vhost, resp.Name = req.Vhost, req.Name
			return resp, nil
		case codes.FailedPrecondition:
			continue
		case codes.NotFound:
			return nil, status.Errorf(codes.NotFound, "queue '%s' in vhost '%s' does not have a message at position %d", req.Name, req.Vhost, req.Position)
		}
		return nil, status.Errorf(codes.Unavailable, "queue '%s' in vhost '%s': leader %s: %s", req.Name, req.Vhost, leader, status.Convert(err).Message())
	}
	return nil, status.Errorf(codes.Aborted, "queue '%s' in vhost '%s': the leadership kept moving", req.Name, req.Vhost)
}

// leaderAwake is group id's leader, the group woken first if it
// hibernates (a sleeping queue may well hold messages), "" if none.
func (s *Server) leaderAwake(ctx context.Context, id string, members []string) string {
	leader := s.findLeader(ctx, id, members)
	if w, ok := s.b.(Waker); ok && leader == "" {
		wctx, cancel := context.WithTimeout(ctx, maxTakeover)
		if w.WakeQueue(wctx, id) == nil {
			leader = s.findLeader(ctx, id, members)
		}
		cancel()
	}
	return leader
}

// MemberPeek implements adminpb.AdminServer.
func (s *Server) MemberPeek(_ context.Context, req *adminpb.MemberPeekRequest) (*adminpb.PeekResponse, error) {
	pb, err := optional[PeekBackend](s, "peeking into a queue is")
	if err != nil {
		return nil, err
	}
	m, err := pb.PeekQueue(req.QueueId, int(req.Position))
	switch {
	case errors.Is(err, ErrNoMessage):
		return nil, status.Errorf(codes.NotFound, "%s has no message at position %d", req.QueueId, req.Position)
	case errors.Is(err, ErrNotFound):
		return nil, status.Errorf(codes.Unavailable, "no replica of %s on %s", req.QueueId, s.b.Self())
	case errors.Is(err, ErrNotLeader):
		return nil, status.Errorf(codes.FailedPrecondition, "%s's replica of %s does not lead", s.b.Self(), req.QueueId)
	case err != nil:
		return nil, status.Errorf(codes.Internal, "%s: %v", req.QueueId, err)
	}
	header, err := wire.AppendContentHeader(nil, &wire.ContentHeader{ClassID: wire.ClassBasic, BodySize: uint64(len(m.Body)), Properties: m.Properties})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s: encode the message's properties: %v", req.QueueId, err)
	}
	return &adminpb.PeekResponse{
		Leader: s.b.Self(), Position: req.Position, Exchange: m.Exchange, RoutingKey: m.RoutingKey,
		ContentHeader: header, Payload: m.Body[:min(len(m.Body), peekPayload)], BodySize: uint64(len(m.Body)),
	}, nil
}
