package admin

import (
	"cmp"
	"context"
	"regexp"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/adminpb"
)

// Rebalance implements adminpb.AdminServer. It reads every alive node's
// replicas once, then moves one queue at a time, each time from the node
// leading the most selected queues to the member leading the fewest, while
// they differ by two or more: every move lowers the spread, so it stops,
// and when it does no queue's leader leads two more than one of its
// followers. Only followers that are voters on alive nodes are targets,
// and a queue whose move fails is not tried again.
func (s *Server) Rebalance(ctx context.Context, req *adminpb.RebalanceRequest) (*adminpb.RebalanceResponse, error) {
	vhosts, err := regexp.Compile(req.VhostPattern)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "--vhost-pattern: %v", err)
	}
	names, err := regexp.Compile(req.QueuePattern)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "--queue-pattern: %v", err)
	}
	groups := s.groups(func(vhost, name string) bool { return vhosts.MatchString(vhost) && names.MatchString(name) })
	survey := s.replicas(ctx)

	type led struct {
		group
		leader string
		failed bool
	}
	resp := &adminpb.RebalanceResponse{}
	counts := map[string]int{} // alive nodes holding replicas: selected queues they lead
	var queues []*led
	for _, g := range groups {
		leader, online := g.view(survey)
		for _, n := range online {
			counts[n] += 0
		}
		if leader == "" {
			resp.Leaderless = append(resp.Leaderless, &adminpb.QueueRef{Vhost: g.vhost, Name: g.name})
			continue
		}
		counts[leader]++
		queues = append(queues, &led{group: g, leader: leader})
	}
	before := make(map[string]int, len(counts))
	for n, c := range counts {
		before[n] = c
	}

	for ctx.Err() == nil {
		var q *led
		var to string
		for _, c := range queues {
			if c.failed {
				continue
			}
			for _, m := range c.members {
				if view, ok := survey[m][c.id]; !ok || view.Role != string(RoleFollower) || counts[c.leader]-counts[m] < 2 {
					continue
				}
				if q == nil || counts[c.leader] > counts[q.leader] ||
					(counts[c.leader] == counts[q.leader] && counts[m] < counts[to]) {
					q, to = c, m
				}
			}
		}
		if q == nil {
			break
		}
		move := &adminpb.LeaderMove{Vhost: q.vhost, Name: q.name, From: q.leader, To: to}
		if err := s.move(ctx, q.id, q.leader, to); err != nil {
			move.Error = err.Error()
			q.failed = true
			s.log.Warn("rebalance: leadership transfer failed", "vhost", q.vhost, "queue", q.name, "from", q.leader, "to", to, "err", err)
		} else {
			counts[q.leader]--
			counts[to]++
			q.leader = to
			s.log.Info("rebalance: moved queue leader", "vhost", q.vhost, "queue", q.name, "from", move.From, "to", to)
		}
		resp.Moves = append(resp.Moves, move)
	}
	for n, c := range counts {
		resp.Nodes = append(resp.Nodes, &adminpb.NodeLeaders{Node: n, Before: uint32(before[n]), After: uint32(c)})
	}
	slices.SortFunc(resp.Nodes, func(a, b *adminpb.NodeLeaders) int { return cmp.Compare(a.Node, b.Node) })
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return resp, nil
}
