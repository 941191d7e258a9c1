package node

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/memberpb"
	"github.com/warrenmq/warren/raftq/replica"
)

// The Member service (proto/memberpb): every node answers for its own
// replicas (memberServer); queueMembership asks it, of this node's
// server directly, when it changes a group's members, and replicas ask
// it of their peers (leadsAt, seesAlive).

// status is node's replica's own view of group id.
func (qm *queueMembership) status(ctx context.Context, node, id string) (*memberpb.StatusReply, error) {
	return qm.askStatus(ctx, &memberpb.StatusRequest{QueueId: id}, node)
}

// askStatus asks node's Member service for its replica's status.
func (qm *queueMembership) askStatus(ctx context.Context, req *memberpb.StatusRequest, node string) (*memberpb.StatusReply, error) {
	rep, err := qm.call(ctx, node, func(ctx context.Context, cl memberpb.MemberClient) (any, error) {
		return cl.Status(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	return rep.(*memberpb.StatusReply), nil
}

// call calls node's Member service: this node's server directly.
func (qm *queueMembership) call(ctx context.Context, node string, call func(context.Context, memberpb.MemberClient) (any, error)) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, memberRPCTimeout)
	defer cancel()
	if node == qm.c.self {
		return call(ctx, localMemberClient{memberServer{c: qm.c}})
	}
	addr, ok := qm.c.addrOf(node)
	if !ok {
		return nil, fmt.Errorf("no address for node %q", node)
	}
	conn, err := qm.c.pool.Conn(addr)
	if err != nil {
		return nil, err
	}
	return call(ctx, memberpb.NewMemberClient(conn))
}

func (c *clusterNode) registerMember() {
	memberpb.RegisterMemberServer(c.grpc, memberServer{c: c})
}

// memberServer serves the Member service from this node's replicas.
type memberServer struct {
	memberpb.UnimplementedMemberServer
	c *clusterNode
}

var _ memberpb.MemberServer = memberServer{}

func (s memberServer) Status(_ context.Context, req *memberpb.StatusRequest) (*memberpb.StatusReply, error) {
	aboutAlive := req.AboutNode != "" && s.c.gossipSeesAlive(req.AboutNode)
	get := s.c.host.get
	if req.Wake {
		get = s.c.host.wake
	}
	r, ok := get(req.QueueId)
	if !ok {
		if z, asleep := s.c.host.sleeping(req.QueueId); asleep {
			// Not woken: a group's status is asked for its own sake.
			return &memberpb.StatusReply{
				Present: true, Asleep: true, State: "Asleep", Term: z.term, LastLogIndex: z.last,
				CommitIndex: z.last, AppliedIndex: z.last, Voter: true, AboutAlive: aboutAlive,
			}, nil
		}
		return &memberpb.StatusReply{AboutAlive: aboutAlive}, nil
	}
	st := r.Status()
	servers, _ := r.Servers() // nil while the replica stops
	return &memberpb.StatusReply{
		Present: true, State: st.State, Term: st.Term, CommitIndex: st.CommitIndex,
		AppliedIndex: st.AppliedIndex, LastLogIndex: st.LastLogIndex, Voter: st.Voter, Leader: r.Leader(),
		Servers: servers, AboutAlive: aboutAlive,
	}, nil
}

func (s memberServer) Change(_ context.Context, req *memberpb.ChangeRequest) (*memberpb.ChangeReply, error) {
	r, ok := s.c.host.wake(req.QueueId) // a change needs the group awake
	if !ok {
		return &memberpb.ChangeReply{NotLeader: true}, nil
	}
	var idx uint64
	var err error
	switch req.Op {
	case memberpb.ChangeOp_ADD_NONVOTER:
		idx, err = r.AddNonvoter(req.Node, req.Addr)
	case memberpb.ChangeOp_ADD_VOTER:
		idx, err = r.AddVoter(req.Node, req.Addr)
	case memberpb.ChangeOp_REMOVE_SERVER:
		idx, err = r.RemoveServer(req.Node)
	case memberpb.ChangeOp_TRANSFER_LEADERSHIP:
		err = r.TransferLeadership(req.Node, req.Addr)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown change %v", req.Op)
	}
	if errors.Is(err, replica.ErrNotLeader) {
		return &memberpb.ChangeReply{NotLeader: true, Leader: r.Leader()}, nil
	}
	if errors.Is(err, replica.ErrMachineVersion) {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &memberpb.ChangeReply{Index: idx}, nil
}

// localMemberClient calls this node's server without gRPC.
type localMemberClient struct{ s memberServer }

func (l localMemberClient) Status(ctx context.Context, in *memberpb.StatusRequest, _ ...grpc.CallOption) (*memberpb.StatusReply, error) {
	return l.s.Status(ctx, in)
}

func (l localMemberClient) Change(ctx context.Context, in *memberpb.ChangeRequest, _ ...grpc.CallOption) (*memberpb.ChangeReply, error) {
	return l.s.Change(ctx, in)
}

func (l localMemberClient) Hibernate(ctx context.Context, in *memberpb.HibernateRequest, _ ...grpc.CallOption) (*memberpb.HibernateReply, error) {
	return l.s.Hibernate(ctx, in)
}

// leadsAt asks node whether its member of group id leads (replica.Config's
// LeadsAt). It does not wake a hibernating member: one that sleeps leads
// nothing.
func (qm *queueMembership) leadsAt(ctx context.Context, node, id string) (bool, error) {
	rep, err := qm.call(ctx, node, func(ctx context.Context, cl memberpb.MemberClient) (any, error) {
		return cl.Status(ctx, &memberpb.StatusRequest{QueueId: id})
	})
	if err != nil {
		return false, err
	}
	return rep.(*memberpb.StatusReply).State == "Leader", nil
}

// seesAlive asks peer whether its gossip sees node alive (replica.Config's
// SeesAlive).
func (qm *queueMembership) seesAlive(ctx context.Context, peer, node string) (bool, error) {
	rep, err := qm.call(ctx, peer, func(ctx context.Context, cl memberpb.MemberClient) (any, error) {
		return cl.Status(ctx, &memberpb.StatusRequest{AboutNode: node})
	})
	if err != nil {
		return false, err
	}
	return rep.(*memberpb.StatusReply).AboutAlive, nil
}
