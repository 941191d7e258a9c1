package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/proto/adminpb"
)

// maxMemberWait bounds how long QuorumStatus waits for one member's node,
// so that one silent node shows as unreachable instead of failing the call.
const maxMemberWait = 2 * time.Second

// Server implements adminpb.AdminServer over a Backend.
type Server struct {
	adminpb.UnimplementedAdminServer
	b     Backend
	pool  *rpc.Pool
	log   *slog.Logger
	users atomic.Pointer[Users] // unset: every call is allowed (authz.go)
}

// NewServer returns the admin service of the node b describes; pool
// reaches the other nodes' admin services.
func NewServer(b Backend, pool *rpc.Pool, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{b: b, pool: pool, log: log.With("component", "admin")}
}

// Register adds the service to the node's internal gRPC server.
func (s *Server) Register(g *grpc.Server) { adminpb.RegisterAdminServer(g, s) }

// ClusterStatus implements adminpb.AdminServer.
func (s *Server) ClusterStatus(context.Context, *adminpb.ClusterStatusRequest) (*adminpb.ClusterStatusResponse, error) {
	resp := &adminpb.ClusterStatusResponse{Node: s.b.Self(), MetadataLeader: s.b.MetadataLeader()}
	for _, n := range s.b.Nodes() {
		resp.Nodes = append(resp.Nodes, nodePB(n))
	}
	slices.SortFunc(resp.Nodes, func(a, b *adminpb.Node) int { return cmp.Compare(a.Name, b.Name) })
	return resp, nil
}

// nodePB is a node as the admin service describes it.
func nodePB(n NodeInfo) *adminpb.Node {
	var alarms []string
	if n.State == membership.Alive {
		alarms = n.Alarms // a node that is down blocks nobody
	}
	return &adminpb.Node{
		Name:         n.Name,
		AmqpAddr:     n.AMQP,
		InternalAddr: n.Internal,
		GossipAddr:   n.Gossip,
		Version:      n.Version,
		State:        n.State.String(),
		MetadataRole: string(n.MetadataRole),
		Draining:     n.Draining,
		Alarms:       alarms,
		QueueMachine: uint32(max(n.QueueMachine, 0)),
	}
}

// ListQueues implements adminpb.AdminServer.
func (s *Server) ListQueues(_ context.Context, req *adminpb.ListQueuesRequest) (*adminpb.ListQueuesResponse, error) {
	resp := &adminpb.ListQueuesResponse{}
	for _, q := range s.b.Queues(req.Vhost, true) {
		resp.Queues = append(resp.Queues, &adminpb.Queue{
			Vhost:         q.Vhost,
			Name:          q.Name,
			Type:          q.Type,
			Leader:        q.Leader,
			Members:       q.Members,
			OnlineMembers: q.Online,
			Messages:      q.Ready + q.Unacked,
			Ready:         q.Ready,
			Unacked:       q.Unacked,
			Consumers:     uint32(q.Consumers),
			DeadLettered:  q.DeadLettered,
			Delayed:       q.Delayed,
		})
	}
	slices.SortFunc(resp.Queues, func(a, b *adminpb.Queue) int {
		return cmp.Or(cmp.Compare(a.Vhost, b.Vhost), cmp.Compare(a.Name, b.Name))
	})
	return resp, nil
}

// QuorumStatus implements adminpb.AdminServer: it asks every member's
// node at once, itself without a call.
func (s *Server) QuorumStatus(ctx context.Context, req *adminpb.QuorumStatusRequest) (*adminpb.QuorumStatusResponse, error) {
	if req.Vhost == "" {
		req.Vhost = "/"
	}
	id, members, err := s.b.QueueGroup(req.Vhost, req.Name)
	if err != nil {
		return nil, queueError(err, req.Vhost, req.Name)
	}
	resp := &adminpb.QuorumStatusResponse{Vhost: req.Vhost, Name: req.Name, QueueId: id}
	resp.Members = make([]*adminpb.Member, len(members))
	var wg sync.WaitGroup
	for i, node := range members {
		wg.Go(func() { resp.Members[i] = s.askMember(ctx, id, node) })
	}
	wg.Wait()
	slices.SortFunc(resp.Members, func(a, b *adminpb.Member) int { return cmp.Compare(a.Node, b.Node) })

	var leader *adminpb.Member
	for _, m := range resp.Members {
		if m.Role == string(RoleLeader) && (leader == nil || m.Term > leader.Term) {
			leader = m
		}
	}
	if leader != nil {
		resp.Leader = leader.Node
		for _, m := range resp.Members {
			if m.Role != string(RoleUnreachable) {
				lag := uint64(0)
				// By the log a member holds: an idle leader tells
				// followers its commit index only now and then, so
				// their applied index trails without anything missing.
				if leader.CommitIndex > m.LastLogIndex {
					lag = leader.CommitIndex - m.LastLogIndex
				}
				m.Lag = &lag
			}
		}
	}
	return resp, nil
}

// queueError is the status for QueueGroup's error.
func queueError(err error, vhost, name string) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return status.Errorf(codes.NotFound, "queue '%s' in vhost '%s' not found", name, vhost)
	case errors.Is(err, ErrNotQuorum):
		return status.Errorf(codes.FailedPrecondition, "queue '%s' in vhost '%s' is not a quorum queue", name, vhost)
	}
	return status.Errorf(codes.Internal, "queue '%s' in vhost '%s': %v", name, vhost, err)
}

// askMember is node's view of its replica of group id, or an unreachable
// member saying why.
func (s *Server) askMember(ctx context.Context, id, node string) *adminpb.Member {
	unreachable := func(err error) *adminpb.Member {
		s.log.Debug("quorum status: member unreachable", "queue_id", id, "node", node, "err", err)
		return &adminpb.Member{Node: node, Role: string(RoleUnreachable), Error: err.Error()}
	}
	if node == s.b.Self() {
		st, ok := s.b.LocalMember(id)
		if !ok {
			return unreachable(fmt.Errorf("no replica of %s on this node", id))
		}
		return memberPB(node, st)
	}
	c, addr, err := s.peer(node)
	if err != nil {
		return unreachable(err)
	}
	ctx, cancel := context.WithTimeout(ctx, memberWait(ctx))
	defer cancel()
	m, err := c.MemberStatus(ctx, &adminpb.MemberStatusRequest{QueueId: id})
	if err != nil {
		return unreachable(fmt.Errorf("%s: %s", addr, status.Convert(err).Message()))
	}
	// The member is named as the queue's record names it; lag is the
	// asker's to compute, once every member has answered.
	m.Node, m.Lag, m.Error = node, nil, ""
	return m
}

// peer is another node's admin service, and its address.
func (s *Server) peer(node string) (adminpb.AdminClient, string, error) {
	addr, ok := s.b.NodeAddr(node)
	if !ok {
		return nil, "", fmt.Errorf("address of %s unknown", node)
	}
	conn, err := s.pool.Conn(addr)
	if err != nil {
		return nil, addr, err
	}
	return adminpb.NewAdminClient(conn), addr, nil
}

// onNode makes one of the internal, node-to-node calls on node: this
// server's own method when node is this one, else the peer's, given
// memberWait of what ctx allows.
func onNode[Req, Resp any](ctx context.Context, s *Server, node string, req Req,
	local func(*Server, context.Context, Req) (Resp, error),
	remote func(adminpb.AdminClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	return onNodeWithin(ctx, s, maxMemberWait, node, req, local, remote)
}

// onNodeWithin is onNode for a call that may take up to most (bounded by
// half of what ctx allows, as memberWait is) on a peer.
func onNodeWithin[Req, Resp any](ctx context.Context, s *Server, most time.Duration, node string, req Req,
	local func(*Server, context.Context, Req) (Resp, error),
	remote func(adminpb.AdminClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	if node == s.b.Self() {
		return local(s, ctx, req)
	}
	c, _, err := s.peer(node)
	if err != nil {
		var none Resp
		return none, err
	}
	ctx, cancel := context.WithTimeout(ctx, waitUpTo(ctx, most))
	defer cancel()
	return remote(c, ctx, req)
}

// memberWait is how long to wait for one member: at most maxMemberWait and
// half of what the caller allows, so that the answer still reaches it.
func memberWait(ctx context.Context) time.Duration { return waitUpTo(ctx, maxMemberWait) }

// waitUpTo is at most d and half of what ctx allows.
func waitUpTo(ctx context.Context, d time.Duration) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline)/2)
	}
	return d
}

// MemberStatus implements adminpb.AdminServer.
func (s *Server) MemberStatus(_ context.Context, req *adminpb.MemberStatusRequest) (*adminpb.Member, error) {
	st, ok := s.b.LocalMember(req.QueueId)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no replica of %s on %s", req.QueueId, s.b.Self())
	}
	return memberPB(s.b.Self(), st), nil
}

func memberPB(node string, st MemberStatus) *adminpb.Member {
	return &adminpb.Member{
		Node:           node,
		Role:           string(st.Role),
		Term:           st.Term,
		CommitIndex:    st.CommitIndex,
		AppliedIndex:   st.AppliedIndex,
		LastLogIndex:   st.LastLogIndex,
		SnapshotIndex:  st.SnapshotIndex,
		MachineVersion: st.MachineVersion,
	}
}
