package broker

import (
	"sync"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// Vhost is one virtual host: its name, default queue type and limits,
// and three parts embedded so that their exported methods are the
// vhost's API to the connection layer: its queues (queueTable), its
// exchanges and bindings and the routing through them (exchangeGraph),
// and its policies (vhostPolicies).
//
// One RWMutex, mu, guards the vhost and all three parts: routing (every
// publish) reads exchanges and queues together under the read lock, and
// a declaration or deletion changes several parts at once (a queue's
// bindings go with it; a policy change recomputes every queue's and
// exchange's arguments) under the write lock. A method whose name ends in
// Locked expects it held.
type Vhost struct {
	b                *Broker
	name             string
	defaultQueueType string

	mu sync.RWMutex
	// limits are the vhost's limits (limits.go), nil for none.
	limits map[string]int64

	queueTable
	exchangeGraph
	vhostPolicies
}

func newVhost(b *Broker, rec catalog.Vhost) *Vhost {
	v := &Vhost{
		b:                b,
		name:             rec.Name,
		defaultQueueType: rec.DefaultQueueType,
		limits:           rec.Limits,
	}
	if v.defaultQueueType == "" {
		v.defaultQueueType = b.cfg.DefaultQueueType
	}
	v.queueTable = queueTable{v: v, queues: make(map[string]*Queue)}
	v.exchangeGraph = newExchangeGraph(v)
	v.vhostPolicies = vhostPolicies{v: v, policies: make(map[string]*policy), opPolicies: make(map[string]*policy)}
	return v
}

// Name is the vhost's name.
func (v *Vhost) Name() string { return v.name }

// DefaultQueueType is the type of durable queues declared without
// x-queue-type.
func (v *Vhost) DefaultQueueType() string { return v.defaultQueueType }

func (v *Vhost) check(u *User, a Access, kind, name string) error {
	if u == nil { // internal operations (auto-delete, connection cleanup)
		return nil
	}
	return v.b.accessControl.check(u, v.name, a, kind, name)
}

// checkAny passes when u has any permission on the resource, which is
// what a passive declare needs; the refusal names configure, as
// RabbitMQ's does.
func (v *Vhost) checkAny(u *User, kind, name string) error {
	if v.check(u, Read, kind, name) == nil || v.check(u, Write, kind, name) == nil {
		return nil
	}
	return v.check(u, Configure, kind, name)
}

func (v *Vhost) notFound(kind, name string) *wire.Error {
	return wire.Errorf(wire.NotFound, "no %s '%s' in vhost '%s'", kind, name, v.name)
}

// persist writes changes of durable entities to the store. Called with
// v.mu held so that the store's order matches the in-memory order.
func (v *Vhost) persist(changes ...catalog.Change) error {
	if len(changes) == 0 {
		return nil
	}
	if err := v.b.store.Apply(changes...); err != nil {
		return v.persistFailed(err)
	}
	return nil
}

// persistFailed is the channel's error when the store did not take a
// change: on a cluster, typically no metadata leader within the wait.
func (v *Vhost) persistFailed(err error) error {
	v.b.log.Error("metadata store write failed", "vhost", v.name, "err", err)
	return wire.Errorf(wire.InternalError, "metadata store write failed: %v", err)
}

// setLimits replaces the vhost's limits: its record changed.
func (v *Vhost) setLimits(limits map[string]int64) {
	v.mu.Lock()
	v.limits = limits
	v.mu.Unlock()
}

func (v *Vhost) close() {
	v.mu.Lock()
	queues := make([]*Queue, 0, len(v.queues))
	for _, q := range v.queues {
		queues = append(queues, q)
	}
	v.mu.Unlock()
	for _, q := range queues {
		q.engine.Close()
	}
}
