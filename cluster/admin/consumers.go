package admin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/adminpb"
)

// A quorum queue's consumer records live in its state machine on every
// member, but only the leader knows who attached through it (the
// consumer's node and tag), so QuorumConsumers finds the leader and asks
// its node.

// ConsumersBackend is what a Backend offers for listing a quorum queue's
// consumer records. A Backend without it answers Unimplemented.
type ConsumersBackend interface {
	// QueueConsumers is the consumer records of group queueID's replica
	// on this node, which must lead: the error wraps ErrNotFound if this
	// node holds no replica of the group, ErrNotLeader if it does not
	// lead.
	QueueConsumers(queueID string) ([]QueueConsumer, error)
}

// QueueConsumer is one consumer record of a quorum queue, as its leader
// has it.
type QueueConsumer struct {
	ID     uint64
	Status string
	// AttachedHere: the consumer attached through this leader, so Node
	// (the consuming channel's), Tag and AckRequired are known.
	AttachedHere bool
	Node, Tag    string
	AckRequired  bool
	Held, Credit uint32
	Priority     int32
	Exclusive    bool
}

// QuorumConsumers implements adminpb.AdminServer.
func (s *Server) QuorumConsumers(ctx context.Context, req *adminpb.QuorumConsumersRequest) (*adminpb.QuorumConsumersResponse, error) {
	if _, ok := s.b.(ConsumersBackend); !ok {
		return nil, status.Error(codes.Unimplemented, "listing a queue's consumers is not available on this node")
	}
	if req.Vhost == "" {
		req.Vhost = "/"
	}
	id, members, err := s.b.QueueGroup(req.Vhost, req.Name)
	if err != nil {
		return nil, queueError(err, req.Vhost, req.Name)
	}
	// The leader may move between finding it and asking it: look again.
	for range 3 {
		leader := s.findLeader(ctx, id, members)
		if leader == "" {
			return nil, status.Errorf(codes.FailedPrecondition,
				"queue '%s' in vhost '%s' has no leader now (electing, without a quorum, or hibernating: it has no consumers then)", req.Name, req.Vhost)
		}
		resp, err := onNode(ctx, s, leader, &adminpb.MemberConsumersRequest{QueueId: id},
			(*Server).MemberConsumers, adminpb.AdminClient.MemberConsumers)
		if status.Code(err) == codes.FailedPrecondition {
			continue
		}
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "queue '%s' in vhost '%s': leader %s: %s", req.Name, req.Vhost, leader, status.Convert(err).Message())
		}
		resp.Vhost, resp.Name = req.Vhost, req.Name
		return resp, nil
	}
	return nil, status.Errorf(codes.Aborted, "queue '%s' in vhost '%s': the leadership kept moving", req.Name, req.Vhost)
}

// MemberConsumers implements adminpb.AdminServer.
func (s *Server) MemberConsumers(_ context.Context, req *adminpb.MemberConsumersRequest) (*adminpb.QuorumConsumersResponse, error) {
	cb, ok := s.b.(ConsumersBackend)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "listing a queue's consumers is not available on this node")
	}
	cs, err := cb.QueueConsumers(req.QueueId)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, status.Errorf(codes.NotFound, "no replica of %s on %s", req.QueueId, s.b.Self())
	case errors.Is(err, ErrNotLeader):
		return nil, status.Errorf(codes.FailedPrecondition, "%s's replica of %s does not lead", s.b.Self(), req.QueueId)
	case err != nil:
		return nil, status.Errorf(codes.Internal, "%s: %v", req.QueueId, err)
	}
	resp := &adminpb.QuorumConsumersResponse{QueueId: req.QueueId, Leader: s.b.Self()}
	for _, c := range cs {
		node := c.Node
		if c.AttachedHere && node == "" {
			node = s.b.Self()
		}
		resp.Consumers = append(resp.Consumers, &adminpb.QueueConsumer{
			Id: c.ID, Status: c.Status, AttachedHere: c.AttachedHere, Node: node, Tag: c.Tag, AckRequired: c.AckRequired,
			Held: c.Held, Credit: c.Credit, Priority: c.Priority, Exclusive: c.Exclusive,
		})
	}
	return resp, nil
}
