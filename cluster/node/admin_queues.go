package node

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// groupAdmin answers for the queues and for this node's members of their
// groups: listings, status, leadership, checkpoints, consumers.
type groupAdmin struct {
	c *clusterNode
	b *broker.Broker
	n *Node
}

func (a groupAdmin) online() map[string]bool {
	alive := map[string]bool{}
	for _, m := range a.c.aliveMembers() {
		alive[m.Name] = true
	}
	return alive
}

func (a groupAdmin) Queues(vhost string, counts bool) []admin.QueueInfo {
	alive := a.online()
	qs := a.b.Queues(vhost)
	out := make([]admin.QueueInfo, len(qs))
	for i, q := range qs {
		rec := q.Record
		info := admin.QueueInfo{Vhost: rec.Vhost, Name: rec.Name, Type: rec.Type, Members: rec.Members}
		info.Leader = a.n.queueLeader(q.Engine)
		if len(info.Members) == 0 {
			info.Members = []string{a.c.self}
		}
		for _, m := range info.Members {
			if alive[m] {
				info.Online = append(info.Online, m)
			}
		}
		out[i] = info
	}
	if counts {
		fillCounts(out, qs)
	}
	return out
}

// fillCounts sets each queue's message and consumer counts. Each count
// may ask the queue's leader, and wait for it up to the forwarder's stats
// timeout when it cannot be reached (its node just died): they are asked
// all at once, so that the listing takes one such wait, not one per queue.
func fillCounts(out []admin.QueueInfo, qs []broker.QueueSummary) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxCountCalls)
	for i, q := range qs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			st := q.Engine.Stats()
			out[i].Ready, out[i].Unacked, out[i].Consumers = uint64(st.Ready), uint64(st.Unacked), int(st.Consumers)
			out[i].DeadLettered, out[i].Delayed = uint64(st.DeadLettered), uint64(st.Delayed)
		})
	}
	wg.Wait()
}

// maxCountCalls bounds the queue counts Queues asks for at once.
const maxCountCalls = 1024

func (a groupAdmin) QueueGroup(vhost, name string) (string, []string, error) {
	rec, ok := a.b.QueueRecord(vhost, name)
	if !ok {
		return "", nil, fmt.Errorf("queue %q in vhost %q: %w", name, vhost, admin.ErrNotFound)
	}
	if rec.Type != broker.QueueTypeQuorum {
		return "", nil, fmt.Errorf("queue %q in vhost %q is %s: %w", name, vhost, rec.Type, admin.ErrNotQuorum)
	}
	return rec.ID, rec.Members, nil
}

func (a groupAdmin) LocalMember(queueID string) (admin.MemberStatus, bool) {
	r, z := a.c.host.member(queueID)
	if z != nil {
		return asleepStatus(z), true
	}
	if r == nil {
		if a.c.quar.holds(queueID) {
			return admin.MemberStatus{Role: admin.RoleQuarantined}, true
		}
		return admin.MemberStatus{}, false
	}
	return a.quarantined(queueID, memberStatus(r)), true
}

// quarantined is st with the role of a member re-syncing after storage
// damage (quarantine.go), open but not yet through its re-sync.
func (a groupAdmin) quarantined(queueID string, st admin.MemberStatus) admin.MemberStatus {
	if a.c.quar.role(queueID) == roleResyncing {
		st.Role = admin.RoleResyncing
	}
	return st
}

// asleepStatus is a hibernating replica's status: as it closed.
func asleepStatus(z *sleeper) admin.MemberStatus {
	return admin.MemberStatus{Role: admin.RoleAsleep, Term: z.term, CommitIndex: z.last, AppliedIndex: z.last, LastLogIndex: z.last}
}

// WakeQueue implements admin.Waker: the group wakes wherever it sleeps
// and elects; it returns once a leader is known.
func (a groupAdmin) WakeQueue(ctx context.Context, queueID string) error {
	q := a.c.host.router(queueID)
	if q == nil {
		return fmt.Errorf("group %s: %w", queueID, admin.ErrNotFound)
	}
	return q.Router.AwaitLeader(ctx)
}

func (a groupAdmin) LocalMembers() map[string]admin.MemberStatus {
	rs, asleep := a.c.host.members()
	out := make(map[string]admin.MemberStatus, len(rs)+len(asleep))
	for id, z := range asleep {
		out[id] = asleepStatus(z)
	}
	for id, r := range rs {
		out[id] = a.quarantined(id, memberStatus(r))
	}
	for _, id := range a.c.quar.ids() {
		if _, ok := out[id]; !ok {
			out[id] = admin.MemberStatus{Role: admin.RoleQuarantined}
		}
	}
	return out
}

func (a groupAdmin) TransferLeadership(ctx context.Context, queueID, to string) error {
	r, ok := a.c.host.get(queueID)
	if !ok {
		return fmt.Errorf("group %s: %w", queueID, admin.ErrNotFound)
	}
	addr, ok := a.c.addrOf(to)
	if !ok {
		return fmt.Errorf("address of %s unknown", to)
	}
	errc := make(chan error, 1)
	go func() { errc <- r.TransferLeadership(to, addr) }()
	select {
	case err := <-errc:
		if errors.Is(err, replica.ErrNotLeader) {
			return fmt.Errorf("group %s: %w", queueID, admin.ErrNotLeader)
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// memberStatus is r's own view of its group, in the admin service's words.
func memberStatus(r *replica.Replica) admin.MemberStatus {
	st := r.Status()
	role := admin.RoleFollower
	switch {
	case st.State == "Leader":
		role = admin.RoleLeader
	case st.State == "Candidate":
		role = admin.RoleCandidate
	case !st.Voter:
		role = admin.RoleNonVoter
	}
	return admin.MemberStatus{Role: role, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		LastLogIndex: st.LastLogIndex, SnapshotIndex: st.SnapshotIndex, MachineVersion: r.MachineVersion()}
}

// CheckpointMember implements admin.CheckpointBackend. A hibernating
// replica wakes for it (and its group with it): closed, it has nothing
// running to snapshot, and its state is rebuilt from its log when it
// opens, which is what a checkpoint shortens. The group goes back to
// sleep once idle again.
//
// A replica closed under it (its group went to sleep just before the
// checkpoint began, which holds hibernation off while it runs) is woken
// and asked again, once.
func (a groupAdmin) CheckpointMember(ctx context.Context, queueID string, appliedThrough uint64) (admin.MemberStatus, error) {
	var err error
	for range 2 {
		r, ok := a.c.host.wake(queueID)
		if !ok {
			return admin.MemberStatus{}, fmt.Errorf("group %s: %w", queueID, admin.ErrNotFound)
		}
		if _, err = r.Checkpoint(ctx, appliedThrough); err == nil {
			return memberStatus(r), nil
		}
		if !errors.Is(err, raft.ErrRaftShutdown) {
			break
		}
	}
	return admin.MemberStatus{}, err
}

func (a groupAdmin) QueueConsumers(queueID string) ([]admin.QueueConsumer, error) {
	r, ok := a.c.host.get(queueID)
	if !ok {
		return nil, fmt.Errorf("group %s: %w", queueID, admin.ErrNotFound)
	}
	cs, err := r.Consumers()
	if errors.Is(err, replica.ErrNotLeader) {
		return nil, fmt.Errorf("group %s: %w", queueID, admin.ErrNotLeader)
	}
	if err != nil {
		return nil, err
	}
	suspended := a.c.fwd.Suspended(queueID)
	out := make([]admin.QueueConsumer, len(cs))
	for i, c := range cs {
		out[i] = admin.QueueConsumer{
			ID: uint64(c.ID), Status: string(c.Status), AttachedHere: c.Here, Node: c.Origin, Tag: c.Tag,
			AckRequired: c.AckRequired, Held: c.Held, Credit: c.Prefetch, Priority: c.Priority, Exclusive: c.Exclusive,
		}
		// Its stream broke and it has not attached again: the machine's
		// record says cancelled (one kept in its place it suspends, and
		// says so), but its deliveries wait for it.
		if origin, ok := suspended[uint64(c.ID)]; ok && !c.Here {
			out[i].Status, out[i].Node = string(raftq.StatusSuspectedDown), origin
		}
	}
	return out, nil
}

func (a groupAdmin) PeekQueue(queueID string, pos int) (*queue.Message, error) {
	r, ok := a.c.host.get(queueID)
	if !ok {
		return nil, fmt.Errorf("group %s: %w", queueID, admin.ErrNotFound)
	}
	m, err := r.Peek(pos)
	switch {
	case errors.Is(err, replica.ErrNotLeader):
		return nil, fmt.Errorf("group %s: %w", queueID, admin.ErrNotLeader)
	case errors.Is(err, replica.ErrNoMessageAtPosition):
		return nil, fmt.Errorf("group %s: %w: %w", queueID, admin.ErrNoMessage, err)
	}
	return m, err
}
