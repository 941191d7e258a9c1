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
// targets. Only followers that are voters on alive nodes and have
// caught up with their leader are targets (caughtUp), and a queue whose
// move fails is not tried again.
func (s *Server) Rebalance(ctx context.Context, req *adminpb.RebalanceRequest) (*adminpb.RebalanceResponse, error) {
	matches, err := queuePatterns(req.VhostPattern, req.QueuePattern)
	if err != nil {
		return nil, err
	}
	groups := s.groups(matches)
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
		if leader == "" && g.asleep(survey) {
			continue // hibernating: it leads nowhere, and wakes with its old leader
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
				if counts[c.leader]-counts[m] < 2 || !caughtUp(survey[c.leader][c.id], survey[m][c.id]) {
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

// maxTransferLag is how many committed entries a follower may still lack
// and be a rebalance target: on a busy queue the leader's commit index
// and the follower's log, read a moment apart, never quite agree (20,000
// entries a second is 1,024 in 50 ms), and sending a thousand entries
// is quick; a replica that missed seconds of such traffic lacks more.
const maxTransferLag = 1024

// queuePatterns matches a queue's vhost and name against the regular
// expressions of --vhost-pattern and --queue-pattern (unanchored, as
// RabbitMQ's; empty matches everything); an invalid one is InvalidArgument.
func queuePatterns(vhostPattern, queuePattern string) (func(vhost, name string) bool, error) {
	vhosts, err := regexp.Compile(vhostPattern)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "--vhost-pattern: %v", err)
	}
	names, err := regexp.Compile(queuePattern)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "--queue-pattern: %v", err)
	}
	return func(vhost, name string) bool { return vhosts.MatchString(vhost) && names.MatchString(name) }, nil
}

// caughtUp reports whether follower, as the survey saw it, can take over
// from leader at once. A Raft leadership transfer first brings the target
// up to date and the old leader refuses writes until the target has won
// or the election timeout (30 s by default) has passed, so a transfer to
// a follower that is behind stalls the queue's publishers: a restarted
// node's replica reports itself a follower before its leader has sent it
// what it missed. Such a follower still holds the term it had before (its
// leader changed while it was away) or lacks recent entries.
func caughtUp(leader, follower *adminpb.Member) bool {
	if leader == nil || follower == nil || follower.Role != string(RoleFollower) || follower.Term != leader.Term {
		return false
	}
	return follower.LastLogIndex+maxTransferLag >= leader.CommitIndex
}
