package node

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/metaraft"
	"github.com/warrenmq/warren/proto/memberpb"
)

// Membership changes of a quorum queue, as rabbitmq-queues add_member,
// delete_member, grow and shrink make them. Any node may be asked: it
// drives the change, sending each Raft configuration change to the node
// whose replica leads the group (the Member service below), and commits
// the queue's new members to the metadata, from which every node opens or
// removes its own replica (clusterQueue.MembersChanged).
//
// Adding node N:
//  1. the leader adds N as a non-voter (AddNonvoter). A non-voter never
//     counts towards the quorum, so until N has caught up the group
//     commits exactly as before, and if anything below fails the group
//     is no less available;
//  2. the record gains N: N's broker opens its replica, which does not
//     bootstrap (the record's Leader stays an old member) but waits for
//     the leader to send it the log, or a snapshot (which carries the
//     live messages' bodies);
//  3. N is asked for its own progress (its replica's Stats: applied
//     index), as Consul's autopilot does, until it has applied the
//     configuration entry of step 1 and trails the leader's commit index
//     by at most maxCatchUpLag entries;
//  4. the leader promotes N (AddVoter); AddMember returns once N itself
//     reports that it votes.
//
// A Voter member (rabbitmq-queues --membership voter) skips step 3: it is
// promoted as soon as the record has it, and the quorum counts it while
// it catches up (a queue of one member grown to two commits nothing
// until the new member has the log).
//
// Removing node N:
//  1. when N's replica leads, the leadership moves to another member
//     first (the leader removing itself would step down mid-change and
//     leave the queue leaderless for an election timeout);
//  2. the leader removes N (RemoveServer): the quorum no longer counts it;
//  3. the record drops N: N's broker removes its replica and its files.
//     In this order a replica is never deleted while it still votes.
//
// A change interrupted between the steps leaves the group and the record
// apart: a non-voter with no replica, or a member the record still lists.
// Asking for the same change again completes it.

const (
	// memberChangeTimeout bounds one AddMember or DeleteMember.
	memberChangeTimeout = 2 * time.Minute
	// maxCatchUpLag is how far behind the leader's commit index a new
	// member may be and still be promoted: it receives the rest as a
	// voter, as any follower does.
	maxCatchUpLag    = 256
	memberRPCTimeout = 2 * time.Second
	memberPoll       = 25 * time.Millisecond
)

// ErrNotClustered: membership changes need a cluster member.
var ErrNotClustered = errors.New("node: not a cluster member")

// Errors of the membership operations, for callers to tell apart.
var (
	ErrNoQueue           = errors.New("no such queue")
	ErrNotQuorumQueue    = errors.New("not a quorum queue")
	ErrMembershipRefused = errors.New("membership change refused")
)

// Membership is how a new member joins, as rabbitmq-queues --membership.
type Membership string

const (
	// Promotable: a non-voter until it has caught up with the leader,
	// then a voter (the default; the empty Membership too).
	Promotable Membership = admin.Promotable
	// Voter: a voter as soon as its replica exists.
	Voter Membership = admin.Voter
)

// AddMember adds a replica of quorum queue name in vhost on node, joining
// as m says, and returns once it is a voter (a Promotable one has then
// caught up with the leader).
func (n *Node) AddMember(vhost, name, node string, m Membership) error {
	if n.cluster == nil {
		return ErrNotClustered
	}
	ctx, cancel := context.WithTimeout(context.Background(), memberChangeTimeout)
	defer cancel()
	return n.cluster.members.add(ctx, n.broker, vhost, name, node, m)
}

// DeleteMember removes node's replica of quorum queue name in vhost.
// Without force it refuses to leave fewer members than a majority of the
// queue's target size (targetSize); it never removes the last member.
func (n *Node) DeleteMember(vhost, name, node string, force bool) error {
	if n.cluster == nil {
		return ErrNotClustered
	}
	ctx, cancel := context.WithTimeout(context.Background(), memberChangeTimeout)
	defer cancel()
	return n.cluster.members.remove(ctx, n.broker, vhost, name, node, force)
}

// GrowStrategy says which queues Grow adds a member to, among those that
// match its patterns and have none on the node.
type GrowStrategy string

const (
	// GrowBelowTarget: queues with fewer members than their target size,
	// Warren's default (RabbitMQ's grow always names a strategy).
	GrowBelowTarget GrowStrategy = ""
	// GrowAll: every queue (rabbitmq-queues grow NODE all).
	GrowAll GrowStrategy = "all"
	// GrowEven: queues with an even number of members, so that they reach
	// an odd size (rabbitmq-queues grow NODE even).
	GrowEven GrowStrategy = "even"
)

// ErrBadStrategy: a grow strategy other than all, even or none.
var ErrBadStrategy = errors.New("unknown grow strategy")

// wants says whether strategy grows a queue of size members whose target
// size is target.
func (s GrowStrategy) wants(size, target int) bool {
	switch s {
	case GrowAll:
		return true
	case GrowEven:
		return size%2 == 0
	}
	return size < target
}

// Grow adds node to every quorum queue whose vhost and name match the
// regular expressions (unanchored, as RabbitMQ's), that has no member on
// node and that strategy selects. It returns the queues changed
// ("vhost/name"), and the errors of those it could not change. New
// members join as m says.
func (n *Node) Grow(node string, vhostPattern, queuePattern string, strategy GrowStrategy, m Membership) ([]string, error) {
	if n.cluster == nil {
		return nil, ErrNotClustered
	}
	if strategy != GrowBelowTarget && strategy != GrowAll && strategy != GrowEven {
		return nil, fmt.Errorf("%w %q: all or even (or none, for the queues below their target size)", ErrBadStrategy, strategy)
	}
	matches, err := queueMatcher(vhostPattern, queuePattern)
	if err != nil {
		return nil, err
	}
	var changed []string
	var errs []error
	for _, q := range n.quorumQueues() {
		rec := q.Record
		if !matches(rec) || slices.Contains(rec.Members, node) || !strategy.wants(len(rec.Members), targetSize(n.broker, rec)) {
			continue
		}
		if err := n.AddMember(rec.Vhost, rec.Name, node, m); err != nil {
			errs = append(errs, fmt.Errorf("%s/%s: %w", rec.Vhost, rec.Name, err))
			continue
		}
		changed = append(changed, rec.Vhost+"/"+rec.Name)
	}
	return changed, errors.Join(errs...)
}

// Added is one member GrowToCount added: queue "vhost/name", and node.
type Added struct {
	Queue, Node string
}

// GrowToCount adds members to every quorum queue whose vhost and name
// match the regular expressions until it has count, as rabbitmq-queues
// grow_to_count: never more than the nodes replicas may be placed on
// (alive, not drained). Strategy GrowEven grows only queues with an even
// number of members, and those by one (the size is looked at again
// before each member, as RabbitMQ's does); otherwise every queue grows.
// Each member goes on the node without one that holds the fewest
// replicas, as the reconciler places them; a queue whose member could
// not be added is not grown further. New members join as m says. It
// returns the members added and the errors of those that could not be.
func (n *Node) GrowToCount(count int, vhostPattern, queuePattern string, strategy GrowStrategy, m Membership) ([]Added, error) {
	if n.cluster == nil {
		return nil, ErrNotClustered
	}
	if count < 1 {
		return nil, fmt.Errorf("%w: node count '%d' must be greater than 0", ErrMembershipRefused, count)
	}
	if strategy != GrowBelowTarget && strategy != GrowAll && strategy != GrowEven {
		return nil, fmt.Errorf("%w %q: all or even", ErrBadStrategy, strategy)
	}
	matches, err := queueMatcher(vhostPattern, queuePattern)
	if err != nil {
		return nil, err
	}
	placeable := n.cluster.PlacementNodes()
	target := min(count, len(placeable))
	queues := n.quorumQueues()
	replicas := map[string]int{}
	for _, q := range queues {
		for _, m := range q.Record.Members {
			replicas[m]++
		}
	}
	var added []Added
	var errs []error
	for _, q := range queues {
		rec := q.Record
		if !matches(rec) {
			continue
		}
		members := slices.Clone(rec.Members)
		for len(members) < target && (strategy != GrowEven || len(members)%2 == 0) {
			candidates := slices.DeleteFunc(slices.Clone(placeable), func(p string) bool { return slices.Contains(members, p) })
			if len(candidates) == 0 {
				break
			}
			to := fewestReplicas(candidates, replicas)
			if err := n.AddMember(rec.Vhost, rec.Name, to, m); err != nil {
				errs = append(errs, fmt.Errorf("%s/%s: %w", rec.Vhost, rec.Name, err))
				break
			}
			members = append(members, to)
			replicas[to]++
			added = append(added, Added{Queue: rec.Vhost + "/" + rec.Name, Node: to})
		}
	}
	return added, errors.Join(errs...)
}

// queueMatcher matches a queue's vhost and name against regular
// expressions, unanchored as RabbitMQ's.
func queueMatcher(vhostPattern, queuePattern string) (func(catalog.Queue) bool, error) {
	vre, err := regexp.Compile(vhostPattern)
	if err != nil {
		return nil, fmt.Errorf("vhost pattern: %w", err)
	}
	qre, err := regexp.Compile(queuePattern)
	if err != nil {
		return nil, fmt.Errorf("queue pattern: %w", err)
	}
	return func(rec catalog.Queue) bool { return vre.MatchString(rec.Vhost) && qre.MatchString(rec.Name) }, nil
}

// Shrink removes node's replica from every quorum queue that has one,
// unless it is the queue's last. It returns the queues changed.
func (n *Node) Shrink(node string) ([]string, error) {
	if n.cluster == nil {
		return nil, ErrNotClustered
	}
	var changed []string
	var errs []error
	for _, q := range n.quorumQueues() {
		rec := q.Record
		if !slices.Contains(rec.Members, node) || len(rec.Members) < 2 {
			continue
		}
		if err := n.DeleteMember(rec.Vhost, rec.Name, node, true); err != nil {
			errs = append(errs, fmt.Errorf("%s/%s: %w", rec.Vhost, rec.Name, err))
			continue
		}
		changed = append(changed, rec.Vhost+"/"+rec.Name)
	}
	return changed, errors.Join(errs...)
}

// quorumQueues are the quorum queues, sorted by vhost and name.
func (n *Node) quorumQueues() []broker.QueueSummary {
	qs := slices.DeleteFunc(n.broker.Queues(""), func(q broker.QueueSummary) bool {
		return q.Record.Type != broker.QueueTypeQuorum || q.Record.ID == ""
	})
	slices.SortFunc(qs, func(a, b broker.QueueSummary) int {
		if a.Record.Vhost != b.Record.Vhost {
			return strings.Compare(a.Record.Vhost, b.Record.Vhost)
		}
		return strings.Compare(a.Record.Name, b.Record.Name)
	})
	return qs
}

// targetSize is the number of members a quorum queue is meant to have:
// its target group size (x-quorum-target-group-size or policy
// target-group-size, which the reconciler grows it to) if it has one, else
// its initial group size.
func targetSize(b *broker.Broker, rec catalog.Queue) int {
	if t := b.TargetGroupSize(rec); t > 0 {
		return t
	}
	return initialSize(rec)
}

// initialSize is a quorum queue's x-quorum-initial-group-size, else
// RabbitMQ's default of three.
func initialSize(rec catalog.Queue) int {
	size := 3
	if len(rec.Arguments) > 0 {
		if args, _, err := wire.DecodeTable(rec.Arguments); err == nil {
			if n, ok := wire.IntValue(args["x-quorum-initial-group-size"]); ok {
				size = int(n)
			}
		}
	}
	return max(size, 1)
}

// quorumRecord is the record of quorum queue name in vhost.
func quorumRecord(b *broker.Broker, vhost, name string) (catalog.Queue, error) {
	rec, ok := b.QueueRecord(vhost, name)
	if !ok {
		return rec, fmt.Errorf("no queue %q in vhost %q: %w", name, vhost, ErrNoQueue)
	}
	if rec.Type != broker.QueueTypeQuorum || rec.ID == "" {
		return rec, fmt.Errorf("queue %q in vhost %q is not a quorum queue: %w", name, vhost, ErrNotQuorumQueue)
	}
	return rec, nil
}

// firstLeader is the record's Leader after a membership change: the
// member that would bootstrap the group were it created again. It must
// be an old member (one with state), never a node just added (which
// would then create a second group of its own), so it is set explicitly
// even on records that left it to Members[0].
func firstLeader(rec catalog.Queue, members []string, prefer string) string {
	if rec.Leader != "" && slices.Contains(members, rec.Leader) {
		return rec.Leader
	}
	if prefer != "" && slices.Contains(members, prefer) {
		return prefer
	}
	for _, m := range rec.Members {
		if slices.Contains(members, m) {
			return m
		}
	}
	return ""
}

// queueMembership drives the membership changes of queue groups this
// node is asked for (the steps above), and asks members about their
// groups over the Member service (memberservice.go). mu serializes the
// changes: each reads a queue's record and members and changes both.
type queueMembership struct {
	c  *clusterNode
	mu sync.Mutex
}

// add makes node a member of quorum queue name in vhost, in the steps
// "Adding node N" above (Node.AddMember).
func (qm *queueMembership) add(ctx context.Context, b *broker.Broker, vhost, name, node string, m Membership) error {
	qm.mu.Lock()
	defer qm.mu.Unlock()
	rec, err := quorumRecord(b, vhost, name)
	if err != nil {
		return err
	}
	if err := qm.checkNode(node); err != nil {
		return err
	}
	addr, _ := qm.c.addrOf(node)
	if slices.Contains(rec.Members, node) {
		// A member already, or an earlier AddMember stopped before
		// promoting it, or an earlier DeleteMember before updating the
		// record: finish the first, redo the others. The leader's
		// configuration tells them apart; the node's own replica may
		// still count itself a voter after the group removed it.
		leader, err := qm.leader(ctx, rec.ID, rec.Members)
		if err != nil {
			return err
		}
		ls, err := qm.status(ctx, leader, rec.ID)
		if err != nil {
			return fmt.Errorf("ask the leader of queue %q in vhost %q: %w", name, vhost, err)
		}
		if ls.Servers[node] {
			return fmt.Errorf("node %s is already a member of queue %q in vhost %q: %w", node, name, vhost, ErrMembershipRefused)
		}
	}
	// 1. A non-voter: replicated to, not counted.
	idx, err := qm.change(ctx, rec.ID, rec.Members, memberpb.ChangeOp_ADD_NONVOTER, node, addr)
	if err != nil {
		return fmt.Errorf("add %s as a non-voter: %w", node, err)
	}
	// 2. The record gains it: its node opens its replica.
	if !slices.Contains(rec.Members, node) {
		members := append(slices.Clone(rec.Members), node)
		slices.Sort(members)
		if err := b.SetQueueMembers(vhost, name, rec.ID, members, firstLeader(rec, members, "")); err != nil {
			if _, rerr := qm.change(ctx, rec.ID, rec.Members, memberpb.ChangeOp_REMOVE_SERVER, node, ""); rerr != nil {
				qm.c.log.Warn("undo adding a non-voter", "queue", vhost+"/"+name, "node", node, "err", rerr)
			}
			return err
		}
		rec.Members = members
	}
	// 3. Caught up, by its own account; a Voter is not waited for.
	if m != Voter {
		if err := qm.awaitCaughtUp(ctx, rec.ID, rec.Members, node, idx); err != nil {
			return fmt.Errorf("new member %s did not catch up: %w", node, err)
		}
	}
	// 4. Promoted.
	if _, err := qm.change(ctx, rec.ID, rec.Members, memberpb.ChangeOp_ADD_VOTER, node, addr); err != nil {
		return fmt.Errorf("promote %s to a voter: %w", node, err)
	}
	// The new member knows it votes once it has the entry: wait for
	// that, so that the answer holds wherever it is checked.
	if err := qm.awaitVoter(ctx, rec.ID, node); err != nil {
		return fmt.Errorf("new member %s promoted, but does not know it yet: %w", node, err)
	}
	qm.c.log.Info("queue member added", "queue", vhost+"/"+name, "node", node, "membership", m)
	return nil
}

// remove takes node's member out of quorum queue name in vhost, in the
// steps "Removing node N" above (Node.DeleteMember).
func (qm *queueMembership) remove(ctx context.Context, b *broker.Broker, vhost, name, node string, force bool) error {
	qm.mu.Lock()
	defer qm.mu.Unlock()
	rec, err := quorumRecord(b, vhost, name)
	if err != nil {
		return err
	}
	if !slices.Contains(rec.Members, node) {
		return fmt.Errorf("node %s is not a member of queue %q in vhost %q: %w", node, name, vhost, ErrMembershipRefused)
	}
	if len(rec.Members) == 1 {
		return fmt.Errorf("node %s holds the last member of queue %q in vhost %q: %w", node, name, vhost, ErrMembershipRefused)
	}
	if size := targetSize(b, rec); len(rec.Members)-1 < size/2+1 && !force {
		return fmt.Errorf("removing %s would leave queue %q in vhost %q %d members, fewer than a majority of its %d (use force): %w",
			node, name, vhost, len(rec.Members)-1, size, ErrMembershipRefused)
	}
	members := slices.DeleteFunc(slices.Clone(rec.Members), func(m string) bool { return m == node })
	// 1. Leadership away from the member going.
	leader, err := qm.leader(ctx, rec.ID, rec.Members)
	if err != nil {
		return err
	}
	if leader == node {
		if leader, err = qm.moveLeadership(ctx, rec.ID, rec.Members, node, members); err != nil {
			return fmt.Errorf("move the leadership away from %s: %w", node, err)
		}
	}
	// 2. Out of the group.
	if _, err := qm.change(ctx, rec.ID, rec.Members, memberpb.ChangeOp_REMOVE_SERVER, node, ""); err != nil {
		return fmt.Errorf("remove %s from the group: %w", node, err)
	}
	// 3. Out of the record: its node removes its replica.
	if err := b.SetQueueMembers(vhost, name, rec.ID, members, firstLeader(rec, members, leader)); err != nil {
		return err
	}
	qm.c.log.Info("queue member removed", "queue", vhost+"/"+name, "node", node)
	return nil
}

// checkNode refuses a node that is not in the cluster.
func (qm *queueMembership) checkNode(node string) error {
	servers, err := qm.c.meta.Servers()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(servers, func(s metaraft.Server) bool { return s.ID == node }) {
		return fmt.Errorf("node %q is not in the cluster", node)
	}
	if _, ok := qm.c.addrOf(node); !ok {
		return fmt.Errorf("no address for node %q", node)
	}
	return nil
}

// moveLeadership hands the leadership of group id from node to a voter
// among to, and returns the new leader.
func (qm *queueMembership) moveLeadership(ctx context.Context, id string, members []string, node string, to []string) (string, error) {
	for _, m := range to {
		st, err := qm.status(ctx, m, id)
		if err != nil || !st.Present || !st.Voter {
			continue
		}
		addr, _ := qm.c.addrOf(m)
		if _, err := qm.change(ctx, id, members, memberpb.ChangeOp_TRANSFER_LEADERSHIP, m, addr); err != nil {
			return "", err
		}
		return qm.waitLeader(ctx, id, members, func(l string) bool { return l != node })
	}
	return "", fmt.Errorf("no voter to take the leadership")
}

// awaitCaughtUp waits until node's replica of group id holds the entry at
// index at least and its log trails the leader's commit index by at most
// maxCatchUpLag. The log, not the applied index: an idle leader tells
// followers its commit index only every few heartbeat timeouts
// (raftq/replica's CommitTimeout), and a log that holds the entries is
// what a voter needs.
func (qm *queueMembership) awaitCaughtUp(ctx context.Context, id string, members []string, node string, index uint64) error {
	t := time.NewTicker(memberPoll)
	defer t.Stop()
	for {
		st, err := qm.status(ctx, node, id)
		if err == nil && st.Present && st.LastLogIndex >= index {
			leader, lerr := qm.leader(ctx, id, members)
			if lerr == nil {
				if ls, err := qm.status(ctx, leader, id); err == nil && ls.Present &&
					st.LastLogIndex+maxCatchUpLag >= ls.CommitIndex {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// awaitVoter waits until node's replica of group id reports itself a
// voter.
func (qm *queueMembership) awaitVoter(ctx context.Context, id, node string) error {
	t := time.NewTicker(memberPoll)
	defer t.Stop()
	for {
		if st, err := qm.status(ctx, node, id); err == nil && st.Present && st.Voter {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// leader is group id's leader, asked of its members.
func (qm *queueMembership) leader(ctx context.Context, id string, members []string) (string, error) {
	return qm.waitLeader(ctx, id, members, func(string) bool { return true })
}

// waitLeader waits until a member of group id says it leads and ok
// accepts it.
func (qm *queueMembership) waitLeader(ctx context.Context, id string, members []string, ok func(string) bool) (string, error) {
	t := time.NewTicker(memberPoll)
	defer t.Stop()
	for {
		for _, m := range members {
			// A hibernating group wakes for the question (hibernate.go).
			st, err := qm.askStatus(ctx, &memberpb.StatusRequest{QueueId: id, Wake: true}, m)
			if err == nil && st.Present && st.State == "Leader" && ok(m) {
				return m, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no leader for the queue: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// change has group id's leader carry out op, finding the leader among
// members and again when it moves.
func (qm *queueMembership) change(ctx context.Context, id string, members []string, op memberpb.ChangeOp, node, addr string) (uint64, error) {
	req := &memberpb.ChangeRequest{QueueId: id, Op: op, Node: node, Addr: addr}
	t := time.NewTicker(memberPoll)
	defer t.Stop()
	for {
		leader, err := qm.leader(ctx, id, members)
		if err != nil {
			return 0, err
		}
		rep, err := qm.call(ctx, leader, func(ctx context.Context, cl memberpb.MemberClient) (any, error) {
			return cl.Change(ctx, req)
		})
		if err != nil {
			return 0, err
		}
		if r := rep.(*memberpb.ChangeReply); !r.NotLeader {
			return r.Index, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// QueueServers is the Raft configuration of queue name's group as this
// node's replica knows it: node name to whether it votes.
func (n *Node) QueueServers(vhost, name string) (map[string]bool, bool) {
	r, _, ok := n.localReplica(vhost, name)
	if !ok {
		return nil, false
	}
	servers, err := r.Servers()
	return servers, err == nil
}
