package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/metaraft"
	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// adminBackend answers the admin service (warrenctl) from this node's
// state: gossip, the metadata group, the broker's model and the replicas.
type adminBackend struct {
	c *clusterNode
	b *broker.Broker
	n *Node
}

var _ admin.Backend = (*adminBackend)(nil)

func (a *adminBackend) Self() string { return a.c.self }

func (a *adminBackend) Nodes() []admin.NodeInfo {
	servers, _ := a.c.meta.Servers()
	leader, _ := a.c.meta.Leader()
	role := func(name string) admin.MetadataRole {
		i := slices.IndexFunc(servers, func(s metaraft.Server) bool { return s.ID == name })
		switch {
		case i < 0:
			return admin.MetadataRoleNone
		case name == leader:
			return admin.MetadataRoleLeader
		case servers[i].Voter:
			return admin.MetadataRoleVoter
		}
		return admin.MetadataRoleNonVoter
	}
	var out []admin.NodeInfo
	seen := map[string]bool{}
	for _, m := range a.c.gossip.Members() {
		seen[m.Name] = true
		if forgotten(m, role(m.Name)) { // drain.go
			continue
		}
		out = append(out, admin.NodeInfo{Member: m, MetadataRole: role(m.Name), Draining: a.b.Draining(m.Name)})
	}
	for _, s := range servers {
		if !seen[s.ID] {
			m := membership.Member{Meta: membership.Meta{Name: s.ID, Internal: s.Addr}, State: membership.Dead}
			out = append(out, admin.NodeInfo{Member: m, MetadataRole: role(s.ID), Draining: a.b.Draining(s.ID)})
		}
	}
	return out
}

func (a *adminBackend) MetadataLeader() string {
	leader, _ := a.c.meta.Leader()
	return leader
}

func (a *adminBackend) online() map[string]bool {
	alive := map[string]bool{}
	for _, m := range a.c.aliveMembers() {
		alive[m.Name] = true
	}
	return alive
}

func (a *adminBackend) Queues(vhost string, counts bool) []admin.QueueInfo {
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
		// Each count may ask the queue's leader, and wait for it up to
		// the forwarder's stats timeout when it cannot be reached (its
		// node just died): ask them all at once, so that the listing
		// takes one such wait, not one per queue.
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
	return out
}

// maxCountCalls bounds the queue counts Queues asks for at once.
const maxCountCalls = 1024

func (a *adminBackend) QueueGroup(vhost, name string) (string, []string, error) {
	rec, ok := a.b.QueueRecord(vhost, name)
	if !ok {
		return "", nil, fmt.Errorf("queue %q in vhost %q: %w", name, vhost, admin.ErrNotFound)
	}
	if rec.Type != broker.QueueTypeQuorum {
		return "", nil, fmt.Errorf("queue %q in vhost %q is %s: %w", name, vhost, rec.Type, admin.ErrNotQuorum)
	}
	return rec.ID, rec.Members, nil
}

func (a *adminBackend) LocalMember(queueID string) (admin.MemberStatus, bool) {
	a.c.mu.Lock()
	r, ok := a.c.replicas[queueID]
	z := a.c.asleep[queueID]
	a.c.mu.Unlock()
	if z != nil {
		return asleepStatus(z), true
	}
	if !ok {
		return admin.MemberStatus{}, false
	}
	return memberStatus(r), true
}

// asleepStatus is a hibernating replica's status: as it closed.
func asleepStatus(z *sleeper) admin.MemberStatus {
	return admin.MemberStatus{Role: admin.RoleAsleep, Term: z.term, CommitIndex: z.last, AppliedIndex: z.last, LastLogIndex: z.last}
}

// WakeQueue implements admin.Waker: the group wakes wherever it sleeps
// and elects; it returns once a leader is known.
func (a *adminBackend) WakeQueue(ctx context.Context, queueID string) error {
	a.c.mu.Lock()
	q := a.c.queues[queueID]
	a.c.mu.Unlock()
	if q == nil {
		return fmt.Errorf("group %s: %w", queueID, admin.ErrNotFound)
	}
	return q.Router.AwaitLeader(ctx)
}

func (a *adminBackend) LocalMembers() map[string]admin.MemberStatus {
	a.c.mu.Lock()
	rs := make(map[string]*replica.Replica, len(a.c.replicas))
	for id, r := range a.c.replicas {
		rs[id] = r
	}
	out := make(map[string]admin.MemberStatus, len(rs)+len(a.c.asleep))
	for id, z := range a.c.asleep {
		out[id] = asleepStatus(z)
	}
	a.c.mu.Unlock()
	for id, r := range rs {
		out[id] = memberStatus(r)
	}
	return out
}

func (a *adminBackend) TransferLeadership(ctx context.Context, queueID, to string) error {
	r, ok := a.c.replica(queueID)
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
func (a *adminBackend) CheckpointMember(ctx context.Context, queueID string, appliedThrough uint64) (admin.MemberStatus, error) {
	var err error
	for range 2 {
		r, ok := a.c.wake(queueID)
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

func (a *adminBackend) NodeAddr(node string) (string, bool) { return a.c.addrOf(node) }

func (a *adminBackend) SetPolicy(p admin.PolicyInfo) error {
	def, err := broker.DefinitionFromJSON(p.Definition)
	if err == nil {
		err = a.b.SetPolicy(broker.PolicyDef{
			Vhost: p.Vhost, Name: p.Name, Operator: p.Operator, Pattern: p.Pattern,
			ApplyTo: p.ApplyTo, Priority: p.Priority, Definition: def,
		})
	}
	return policyError(err)
}

func (a *adminBackend) ClearPolicy(vhost, name string, operator bool) error {
	return policyError(a.b.ClearPolicy(vhost, name, operator))
}

func (a *adminBackend) Policies(vhost string, operator bool) []admin.PolicyInfo {
	var out []admin.PolicyInfo
	for _, p := range a.b.Policies(vhost, operator) {
		out = append(out, admin.PolicyInfo{
			Vhost: p.Vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
			Definition: broker.DefinitionJSON(p.Definition), Priority: p.Priority, Operator: p.Operator,
		})
	}
	return out
}

// policyError turns the broker's refusals into the admin service's.
func policyError(err error) error {
	var pe *broker.PolicyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return admin.Invalid(pe.Msg)
	case errors.Is(err, broker.ErrNoPolicy):
		return fmt.Errorf("%w: %v", admin.ErrNotFound, err)
	}
	return err
}

// lateBackend is the admin service's backend while the node starts: the
// gRPC server (and with it the admin service) comes up before the broker,
// which restores its queues through the cluster.
type lateBackend struct {
	mu sync.RWMutex
	b  admin.Backend
}

func (l *lateBackend) set(b admin.Backend) {
	l.mu.Lock()
	l.b = b
	l.mu.Unlock()
}

// Current is the node's backend once it is set, nil before
// (admin.Deferred: the optional interfaces are looked for on it).
func (l *lateBackend) Current() admin.Backend {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.b
}

func (l *lateBackend) get() admin.Backend {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.b == nil {
		return startingBackend{}
	}
	return l.b
}

func (l *lateBackend) Self() string            { return l.get().Self() }
func (l *lateBackend) Nodes() []admin.NodeInfo { return l.get().Nodes() }
func (l *lateBackend) MetadataLeader() string  { return l.get().MetadataLeader() }
func (l *lateBackend) Queues(v string, counts bool) []admin.QueueInfo {
	return l.get().Queues(v, counts)
}
func (l *lateBackend) QueueGroup(v, n string) (string, []string, error) {
	return l.get().QueueGroup(v, n)
}
func (l *lateBackend) LocalMember(id string) (admin.MemberStatus, bool) {
	return l.get().LocalMember(id)
}
func (l *lateBackend) NodeAddr(n string) (string, bool)   { return l.get().NodeAddr(n) }
func (l *lateBackend) SetPolicy(p admin.PolicyInfo) error { return l.get().SetPolicy(p) }
func (l *lateBackend) ClearPolicy(v, n string, op bool) error {
	return l.get().ClearPolicy(v, n, op)
}
func (l *lateBackend) Policies(v string, op bool) []admin.PolicyInfo {
	return l.get().Policies(v, op)
}
func (l *lateBackend) LocalMembers() map[string]admin.MemberStatus { return l.get().LocalMembers() }
func (l *lateBackend) WakeQueue(ctx context.Context, id string) error {
	if w, ok := l.get().(admin.Waker); ok {
		return w.WakeQueue(ctx, id)
	}
	return fmt.Errorf("group %s: %w", id, admin.ErrNotFound)
}
func (l *lateBackend) TransferLeadership(ctx context.Context, id, to string) error {
	return l.get().TransferLeadership(ctx, id, to)
}
func (l *lateBackend) QueueConsumers(id string) ([]admin.QueueConsumer, error) {
	if cb, ok := l.get().(admin.ConsumersBackend); ok {
		return cb.QueueConsumers(id)
	}
	return nil, fmt.Errorf("node starting: %w", admin.ErrNotFound)
}
func (l *lateBackend) Connections() []server.ConnectionInfo {
	if cb, ok := l.get().(admin.ConnectionsBackend); ok {
		return cb.Connections()
	}
	return nil // starting: no clients yet
}

// startingBackend answers before the broker is up.
type startingBackend struct{}

func (startingBackend) Self() string                          { return "" }
func (startingBackend) Nodes() []admin.NodeInfo               { return nil }
func (startingBackend) MetadataLeader() string                { return "" }
func (startingBackend) Queues(string, bool) []admin.QueueInfo { return nil }
func (startingBackend) LocalMember(string) (admin.MemberStatus, bool) {
	return admin.MemberStatus{}, false
}
func (startingBackend) NodeAddr(string) (string, bool) { return "", false }
func (startingBackend) SetPolicy(admin.PolicyInfo) error {
	return errors.New("node starting")
}
func (startingBackend) ClearPolicy(string, string, bool) error {
	return errors.New("node starting")
}
func (startingBackend) Policies(string, bool) []admin.PolicyInfo { return nil }
func (startingBackend) QueueGroup(v, n string) (string, []string, error) {
	return "", nil, fmt.Errorf("node starting: %w", admin.ErrNotFound)
}
func (startingBackend) LocalMembers() map[string]admin.MemberStatus { return nil }
func (startingBackend) TransferLeadership(context.Context, string, string) error {
	return fmt.Errorf("node starting: %w", admin.ErrNotFound)
}

// adminError tells the admin service what kind of failure a membership
// operation met.
func adminError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNoQueue):
		return fmt.Errorf("%w: %w", admin.ErrNotFound, err)
	case errors.Is(err, ErrNotQuorumQueue):
		return fmt.Errorf("%w: %w", admin.ErrNotQuorum, err)
	case errors.Is(err, ErrMembershipRefused), errors.Is(err, ErrNotClustered):
		return fmt.Errorf("%w: %w", admin.ErrRefused, err)
	}
	return err
}

// adminErrors is adminError for each of a grow's or shrink's errors.
func adminErrors(err error) error {
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		return adminError(err)
	}
	var out []error
	for _, e := range joined.Unwrap() {
		out = append(out, adminError(e))
	}
	return errors.Join(out...)
}

func (a *adminBackend) AddMember(_ context.Context, vhost, name, node, membership string) error {
	return adminError(a.n.AddMember(vhost, name, node, Membership(membership)))
}

func (a *adminBackend) DeleteMember(_ context.Context, vhost, name, node string, force bool) error {
	return adminError(a.n.DeleteMember(vhost, name, node, force))
}

func (a *adminBackend) Grow(_ context.Context, node, vhostPattern, queuePattern, strategy, membership string) ([]string, error) {
	changed, err := a.n.Grow(node, vhostPattern, queuePattern, GrowStrategy(strategy), Membership(membership))
	return changed, adminErrors(err)
}

// GrowToCount implements admin.GrowToCountBackend.
func (a *adminBackend) GrowToCount(_ context.Context, count int, vhostPattern, queuePattern, strategy, membership string) ([]admin.AddedMember, error) {
	added, err := a.n.GrowToCount(count, vhostPattern, queuePattern, GrowStrategy(strategy), Membership(membership))
	out := make([]admin.AddedMember, len(added))
	for i, m := range added {
		out[i] = admin.AddedMember(m)
	}
	return out, adminErrors(err)
}

func (a *adminBackend) Shrink(_ context.Context, node string) ([]string, error) {
	changed, err := a.n.Shrink(node)
	return changed, adminErrors(err)
}

func (l *lateBackend) AddMember(ctx context.Context, v, q, n, m string) error {
	return l.get().AddMember(ctx, v, q, n, m)
}
func (l *lateBackend) DeleteMember(ctx context.Context, v, q, n string, force bool) error {
	return l.get().DeleteMember(ctx, v, q, n, force)
}
func (l *lateBackend) Grow(ctx context.Context, n, vp, qp, strategy, m string) ([]string, error) {
	return l.get().Grow(ctx, n, vp, qp, strategy, m)
}
func (l *lateBackend) Shrink(ctx context.Context, n string) ([]string, error) {
	return l.get().Shrink(ctx, n)
}

var errStarting = fmt.Errorf("node starting: %w", admin.ErrRefused)

func (startingBackend) AddMember(context.Context, string, string, string, string) error {
	return errStarting
}
func (startingBackend) DeleteMember(context.Context, string, string, string, bool) error {
	return errStarting
}
func (startingBackend) Grow(context.Context, string, string, string, string, string) ([]string, error) {
	return nil, errStarting
}
func (startingBackend) Shrink(context.Context, string) ([]string, error) { return nil, errStarting }

var (
	_ admin.ConnectionsBackend = (*adminBackend)(nil)
	_ admin.ConnectionsBackend = (*lateBackend)(nil)
	_ admin.ConsumersBackend   = (*adminBackend)(nil)
	_ admin.ConsumersBackend   = (*lateBackend)(nil)
	_ admin.PeekBackend        = (*adminBackend)(nil)
	_ admin.CheckpointBackend  = (*adminBackend)(nil)
	_ admin.GrowToCountBackend = (*adminBackend)(nil)
	_ admin.StatusBackend      = (*adminBackend)(nil)
	_ admin.ConnectionCloser   = (*adminBackend)(nil)
	_ admin.AlarmsBackend      = (*adminBackend)(nil)
	_ admin.Deferred           = (*lateBackend)(nil)
)

func (a *adminBackend) Connections() []server.ConnectionInfo { return a.n.Connections() }

func (a *adminBackend) QueueConsumers(queueID string) ([]admin.QueueConsumer, error) {
	r, ok := a.c.replica(queueID)
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

func (a *adminBackend) PeekQueue(queueID string, pos int) (*queue.Message, error) {
	r, ok := a.c.replica(queueID)
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

func (a *adminBackend) NodeStatus() admin.NodeStatus {
	dir, err := filepath.Abs(a.n.cfg.DataDir)
	if err != nil {
		dir = a.n.cfg.DataDir
	}
	payloads := a.n.cfg.Broker.Replica.Payloads
	st := admin.NodeStatus{Started: a.n.started, DataDir: dir, AMQPListen: a.n.AMQPAddr().String(), Running: a.c.ready(a.b),
		PayloadCache: payloads.Used(), PayloadCacheLimit: payloads.Limit()}
	for _, c := range a.n.Connections() {
		st.Connections++
		st.Channels += len(c.Channels)
	}
	return st
}

func (a *adminBackend) CloseConnections(f server.ConnectionFilter, reason string) []server.ClosedConnection {
	closed := a.n.server.CloseMatching(f, wire.Errorf(wire.ConnectionForced, "%s", reason))
	for _, c := range closed {
		a.n.log.Info("closed a client connection by an operator's request", "connection", c.Name, "user", c.User, "vhost", c.Vhost, "reason", reason)
	}
	return closed
}
