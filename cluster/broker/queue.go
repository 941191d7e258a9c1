package broker

import (
	"sync/atomic"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/raftq/queue"
)

// Queue types.
const (
	QueueTypeClassic = "classic"
	QueueTypeQuorum  = "quorum"
)

// OwnerID identifies a connection that owns exclusive queues. Zero is no
// owner.
type OwnerID uint64

var lastOwner atomic.Uint64

// NewOwnerID returns a fresh connection identity.
func NewOwnerID() OwnerID { return OwnerID(lastOwner.Add(1)) }

// Queue is a declared queue: its record, its owner and its engine.
type Queue struct {
	vhost *Vhost
	rec   catalog.Queue
	// args are the x-arguments the queue was declared with.
	args wire.Table
	// eff are args with the policies that apply (policy.go): what the
	// engine runs with. policy and opPolicy name those policies.
	// Guarded by vhost.mu, as are the reconfiguration counters below.
	eff              wire.Table
	policy, opPolicy string
	// dlx is where dead letters go under eff; nil for nowhere.
	dlx atomic.Pointer[deadLetterTarget]
	// effVer counts changes of eff; pushedVer is the version last handed
	// to the engine by this node; pushing: a hand-over is under way
	// (policy_apply.go).
	effVer, pushedVer uint64
	pushing           bool
	// owner is the connection of an exclusive queue, zero otherwise.
	owner  OwnerID
	engine queue.Queue
	// bindings leaving exchanges towards this queue, to drop them with it.
	bindings map[*binding]*exchange
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.rec.Name }

// Type is the queue's type, "classic" or "quorum".
func (q *Queue) Type() string { return q.rec.Type }

// Engine is the queue itself, behind the queue-type boundary.
func (q *Queue) Engine() queue.Queue { return q.engine }

// Exclusive reports whether the queue belongs to one connection.
func (q *Queue) Exclusive() bool { return q.owner != 0 }

// Arguments are the x-arguments it was declared with.
func (q *Queue) Arguments() wire.Table { return q.args }

// EffectiveArguments are its x-arguments with policies applied: what it
// runs with. Read under the vhost's lock when policies may change.
func (q *Queue) EffectiveArguments() wire.Table {
	q.vhost.mu.RLock()
	defer q.vhost.mu.RUnlock()
	return q.eff
}

func (q *Queue) describe() string {
	return "queue '" + q.rec.Name + "' in vhost '" + q.vhost.name + "'"
}

func describeQueue(name, vhost string) string {
	return "queue '" + name + "' in vhost '" + vhost + "'"
}

// lockedErr is the error for touching another connection's exclusive queue.
func lockedErr(name, vhost string) error {
	return wire.Errorf(wire.ResourceLocked, "cannot obtain exclusive access to locked %s. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", describeQueue(name, vhost))
}

// isReplicated says whether a queue keeps its messages in a Raft group:
// quorum queues, and durable classic queues (a one-member group), which
// the metadata store records and every node can reach.
func isReplicated(rec catalog.Queue, owner OwnerID) bool {
	return rec.Type == QueueTypeQuorum || (rec.Type == QueueTypeClassic && rec.Durable && owner == 0 && !rec.AutoDelete)
}
