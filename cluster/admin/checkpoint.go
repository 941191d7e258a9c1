package admin

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Forced checkpoints, as rabbitmq-queues force_checkpoint: every member of
// each matching quorum queue snapshots its state now, so that raft
// compacts its log. RabbitMQ casts the request to the members and answers
// ok; Warren waits for the snapshots and shows each member's snapshot
// index, or why it has none, so that a script can tell it happened.

// CheckpointBackend is what a Backend offers for forced checkpoints. A
// Backend without it answers Unimplemented.
type CheckpointBackend interface {
	// CheckpointMember has this node's replica of group queueID take a
	// snapshot, waking it first if its group hibernates, and returns its
	// status afterwards. A follower first waits a while to have applied
	// appliedThrough (0: its whole log). The error wraps ErrNotFound if
	// this node holds no replica of the group.
	CheckpointMember(ctx context.Context, queueID string, appliedThrough uint64) (MemberStatus, error)
}

const (
	// checkpointQueues bounds the queues checkpointed at once: each wakes
	// if it hibernates, and its members write a snapshot each.
	checkpointQueues = 8
	// maxCheckpointWait bounds how long one member may take, so that a
	// silent node shows as unreachable instead of failing the call. A
	// snapshot writes the queue's whole state: a large backlog takes
	// seconds.
	maxCheckpointWait = time.Minute
)

// ForceCheckpoint implements adminpb.AdminServer.
func (s *Server) ForceCheckpoint(ctx context.Context, req *adminpb.ForceCheckpointRequest) (*adminpb.ForceCheckpointResponse, error) {
	if _, err := optional[CheckpointBackend](s, "forcing checkpoints is"); err != nil {
		return nil, err
	}
	matches, err := queuePatterns(req.VhostPattern, req.QueuePattern)
	if err != nil {
		return nil, err
	}
	groups := s.groups(matches)
	alive := s.alive()
	resp := &adminpb.ForceCheckpointResponse{Queues: make([]*adminpb.QueueCheckpoint, len(groups))}
	slots := make(chan struct{}, checkpointQueues)
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			resp.Queues[i] = s.checkpointQueue(ctx, g, alive)
		})
	}
	wg.Wait()
	s.log.Info("forced checkpoints", "queues", len(groups), "vhost_pattern", req.VhostPattern, "queue_pattern", req.QueuePattern)
	return resp, nil
}

// checkpointQueue asks g's leader (the group woken first if it
// hibernates), then the other members at once, but for those on nodes
// gossip does not see alive. The leader's checkpoint begins with two
// barriers, the second of which tells the followers the first is
// committed: on an idle queue they would otherwise not know, and have
// applied nothing to snapshot (nothing raft lets them snapshot, after a
// membership change).
func (s *Server) checkpointQueue(ctx context.Context, g group, alive map[string]bool) *adminpb.QueueCheckpoint {
	qc := &adminpb.QueueCheckpoint{Vhost: g.vhost, Name: g.name, Members: make([]*adminpb.Member, len(g.members))}
	leader := s.leaderAwake(ctx, g.id, g.members)
	var through uint64
	if i := slices.Index(g.members, leader); i >= 0 {
		qc.Members[i] = s.checkpointOn(ctx, g.id, leader, 0)
		if idx := qc.Members[i].SnapshotIndex; idx > 0 {
			through = idx - 1 // the first barrier: the second told them it is committed
		}
	}
	var wg sync.WaitGroup
	for i, node := range g.members {
		switch {
		case qc.Members[i] != nil: // the leader
		case !alive[node]:
			qc.Members[i] = &adminpb.Member{Node: node, Role: string(RoleUnreachable), Error: "node " + node + " is not alive"}
		default:
			wg.Go(func() { qc.Members[i] = s.checkpointOn(ctx, g.id, node, through) })
		}
	}
	wg.Wait()
	slices.SortFunc(qc.Members, func(a, b *adminpb.Member) int { return cmp.Compare(a.Node, b.Node) })
	return qc
}

// checkpointOn is node's replica of group id after its checkpoint, or an
// unreachable member saying why it has none.
func (s *Server) checkpointOn(ctx context.Context, id, node string, appliedThrough uint64) *adminpb.Member {
	req := &adminpb.MemberCheckpointRequest{QueueId: id, AppliedThrough: appliedThrough}
	m, err := onNodeWithin(ctx, s, maxCheckpointWait, node, req, (*Server).MemberCheckpoint, adminpb.AdminClient.MemberCheckpoint)
	if err != nil {
		s.log.Warn("forced checkpoint failed", "queue_id", id, "node", node, "err", err)
		return &adminpb.Member{Node: node, Role: string(RoleUnreachable), Error: status.Convert(err).Message()}
	}
	m.Node = node // as the queue's record names it
	return m
}

// MemberCheckpoint implements adminpb.AdminServer.
func (s *Server) MemberCheckpoint(ctx context.Context, req *adminpb.MemberCheckpointRequest) (*adminpb.Member, error) {
	cb, err := optional[CheckpointBackend](s, "forcing checkpoints is")
	if err != nil {
		return nil, err
	}
	st, err := cb.CheckpointMember(ctx, req.QueueId, req.AppliedThrough)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, status.Errorf(codes.NotFound, "no replica of %s on %s", req.QueueId, s.b.Self())
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "checkpoint of %s on %s: %v", req.QueueId, s.b.Self(), err)
	}
	return memberPB(s.b.Self(), st), nil
}
