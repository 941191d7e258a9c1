package node

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/admin"
)

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

func (l *lateBackend) Self() string { return l.get().Self() }

func (l *lateBackend) Nodes() []admin.NodeInfo { return l.get().Nodes() }

func (l *lateBackend) MetadataLeader() string { return l.get().MetadataLeader() }

func (l *lateBackend) Queues(v string, counts bool) []admin.QueueInfo {
	return l.get().Queues(v, counts)
}

func (l *lateBackend) QueueGroup(v, n string) (string, []string, error) {
	return l.get().QueueGroup(v, n)
}

func (l *lateBackend) LocalMember(id string) (admin.MemberStatus, bool) {
	return l.get().LocalMember(id)
}

func (l *lateBackend) NodeAddr(n string) (string, bool) { return l.get().NodeAddr(n) }

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

func (l *lateBackend) maintenance() (admin.MaintenanceBackend, error) {
	mb, ok := l.get().(admin.MaintenanceBackend)
	if !ok {
		return nil, errStarting
	}
	return mb, nil
}

func (l *lateBackend) SetDraining(node string, draining bool) error {
	mb, err := l.maintenance()
	if err != nil {
		return err
	}
	return mb.SetDraining(node, draining)
}

func (l *lateBackend) Maintain(ctx context.Context, draining bool) (bool, int, error) {
	mb, err := l.maintenance()
	if err != nil {
		return false, 0, err
	}
	return mb.Maintain(ctx, draining)
}

func (l *lateBackend) ForgetServer(ctx context.Context, node string) error {
	mb, err := l.maintenance()
	if err != nil {
		return err
	}
	return mb.ForgetServer(ctx, node)
}

// startingBackend answers before the broker is up.
type startingBackend struct{}

func (startingBackend) Self() string { return "" }

func (startingBackend) Nodes() []admin.NodeInfo { return nil }

func (startingBackend) MetadataLeader() string { return "" }

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
