// Package admin is the node's operator service (proto/adminpb), served on
// the internal gRPC address next to Raft and forwarding; cmd/warrenctl is
// its client. The node supplies what it knows through Backend; the server
// turns that into answers, and asks other nodes for what only they know
// (each replica's own Raft view) through the shared peer connections.
//
// Adding an operator command is one RPC in admin.proto, one method on
// Server (with whatever it needs from Backend) and one entry in
// warrenctl's command table.
package admin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/membership"
)

// Backend is what the node tells the admin service. Its methods are called
// from gRPC handler goroutines, concurrently, and must not block on
// other nodes: each answers from this node's own state.
type Backend interface {
	// Self is this node's name.
	Self() string
	// Nodes is every node this node knows of: gossip's members and the
	// metadata group's servers. A server gossip has never seen has only
	// a name and internal address, and State membership.Dead.
	Nodes() []NodeInfo
	// MetadataLeader is the metadata group's leader's node name, or ""
	// if none is known.
	MetadataLeader() string
	// Queues is this node's copy of the queue definitions of vhost (""
	// means all vhosts), with leaders and online members as best known
	// here and, if counts, the message and consumer counts, which ask
	// each queue's leader (waiting a while for one that cannot be
	// reached): only listings that show counts ask for them.
	Queues(vhost string, counts bool) []QueueInfo
	// QueueGroup is the Raft group of a quorum queue and its members'
	// node names. The error wraps ErrNotFound if there is no such queue,
	// ErrNotQuorum if it is not a quorum queue.
	QueueGroup(vhost, name string) (queueID string, members []string, err error)
	// LocalMember is this node's replica of group queueID as its Raft
	// instance sees it; false if this node holds no replica of it.
	LocalMember(queueID string) (MemberStatus, bool)
	// NodeAddr is a node's internal (gRPC) address; false if unknown.
	NodeAddr(node string) (internalAddr string, ok bool)

	// SetPolicy creates or replaces a policy or operator policy and
	// returns once the change is committed. A refused policy's error
	// wraps ErrInvalid and reads as RabbitMQ's validation text. It may
	// wait for the metadata group's leader (unlike the calls above).
	SetPolicy(p PolicyInfo) error
	// ClearPolicy deletes one, once committed; ErrNotFound if there is
	// none of that name.
	ClearPolicy(vhost, name string, operator bool) error
	// Policies lists the policies (operator: operator policies) of
	// vhost ("" means all vhosts), by vhost, priority, name.
	Policies(vhost string, operator bool) []PolicyInfo

	// LocalMembers is every queue replica this node holds, by queue ID,
	// as its Raft instance sees it.
	LocalMembers() map[string]MemberStatus
	// TransferLeadership hands the leadership of group queueID, which
	// this node's replica must lead, to member to, and returns once
	// Raft's transfer is done (this replica has stepped down) or ctx
	// ends. It waits for the target (unlike the calls above). The error
	// wraps ErrNotFound if this node holds no replica of the group,
	// ErrNotLeader if its replica does not lead.
	TransferLeadership(ctx context.Context, queueID, to string) error
	// AddMember, DeleteMember, Grow and Shrink change the members of
	// quorum queues (the node drives the change with the queues'
	// leaders). Grow and Shrink return the queues changed ("vhost/name")
	// and, joined, the errors of those that could not be. membership is
	// how a new member joins: Promotable or Voter.
	AddMember(ctx context.Context, vhost, name, node, membership string) error
	DeleteMember(ctx context.Context, vhost, name, node string, force bool) error
	Grow(ctx context.Context, node, vhostPattern, queuePattern, strategy, membership string) ([]string, error)
	Shrink(ctx context.Context, node string) ([]string, error)
}

// Deferred is a Backend that stands in for one set later (a node's admin
// service starts before its broker). The optional interfaces a Backend may
// offer (AlarmsBackend, AccessBackend, ...) are looked for on Current,
// which is nil while the node starts.
type Deferred interface {
	Current() Backend
}

// optional is the server's backend as T, one of the optional interfaces:
// UNAVAILABLE while a Deferred backend has none yet, UNIMPLEMENTED if the
// backend does not offer T (what names it in the message).
func optional[T any](s *Server, what string) (T, error) {
	var none T
	b := s.b
	if d, ok := b.(Deferred); ok {
		if b = d.Current(); b == nil {
			return none, status.Errorf(codes.Unavailable, "node %s is starting", s.b.Self())
		}
	}
	t, ok := b.(T)
	if !ok {
		return none, status.Errorf(codes.Unimplemented, "%s not available on this node", what)
	}
	return t, nil
}

// PolicyInfo is a policy or operator policy.
type PolicyInfo struct {
	Vhost, Name string
	Pattern     string
	ApplyTo     string
	// Definition is a JSON object.
	Definition string
	Priority   int
	Operator   bool
}

// Errors a Backend returns (wrapped as it likes); the server answers them
// with NOT_FOUND and FAILED_PRECONDITION.
var (
	ErrNotFound  = errors.New("not found")
	ErrNotQuorum = errors.New("not a quorum queue")
	ErrInvalid   = errors.New("invalid")
	ErrNotLeader = errors.New("not the leader")
	// ErrRefused: a membership change the queue's rules refuse (the
	// last member, below a majority without force, already a member).
	ErrRefused = errors.New("refused")
)

// Invalid is an error that wraps ErrInvalid and reads as msg: the server
// answers it with INVALID_ARGUMENT and msg.
func Invalid(msg string) error { return invalidError(msg) }

type invalidError string

func (e invalidError) Error() string        { return string(e) }
func (e invalidError) Is(target error) bool { return target == ErrInvalid }

// statusOf answers a Backend's error with the code its kind calls for and
// its own text, or with otherwise when it is of none of the kinds.
func statusOf(err error, otherwise codes.Code) error {
	code := otherwise
	switch {
	case errors.Is(err, ErrExists):
		code = codes.AlreadyExists
	case errors.Is(err, ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, ErrNotQuorum), errors.Is(err, ErrRefused):
		code = codes.FailedPrecondition
	}
	return status.Error(code, err.Error())
}

// NodeInfo is one node: its gossip metadata and state, and its role in
// the metadata group.
type NodeInfo struct {
	membership.Member
	MetadataRole MetadataRole
	// Draining: the node is in maintenance mode (drain.go).
	Draining bool
}

// MetadataRole is a node's place in the metadata Raft group.
type MetadataRole string

const (
	MetadataRoleLeader   MetadataRole = "leader"
	MetadataRoleVoter    MetadataRole = "voter"
	MetadataRoleNonVoter MetadataRole = "non-voter"
	MetadataRoleNone     MetadataRole = "none" // not a server of the group
)

// QueueInfo is one queue as this node knows it.
type QueueInfo struct {
	Vhost, Name string
	Type        string // quorum or classic
	Leader      string // node name; "" if the group has no leader
	Members     []string
	Online      []string // members whose node gossip sees alive
	Ready       uint64
	Unacked     uint64
	Consumers   int
	// DeadLettered are at-least-once dead letters awaiting their
	// targets' confirms.
	DeadLettered uint64
	// Delayed are returned messages waiting out a delayed retry.
	Delayed uint64
}

// Role is a replica's place in its queue's Raft group.
type Role string

const (
	RoleLeader    Role = "leader"
	RoleFollower  Role = "follower"
	RoleCandidate Role = "candidate"
	RoleNonVoter  Role = "non-voter"
	// RoleAsleep: the replica is closed while its idle group hibernates
	// (cluster/node's hibernate.go); the group elects when it is needed.
	RoleAsleep Role = "asleep"
	// RoleQuarantined: the member's storage was found damaged; it is not
	// started, and waits to re-sync from its group (cluster/node's
	// quarantine.go). RoleResyncing: it is open again, empty, and
	// catching up as a non-voter.
	RoleQuarantined Role = "quarantined"
	RoleResyncing   Role = "re-syncing"
	// RoleUnreachable is never reported by a replica itself: the asking
	// node uses it for a member it could not ask.
	RoleUnreachable Role = "unreachable"
)

// Waker is a Backend that can wake a hibernating queue group.
type Waker interface {
	// WakeQueue wakes group queueID wherever it sleeps and returns once
	// it has a leader, or ctx ends.
	WakeQueue(ctx context.Context, queueID string) error
}

// MemberStatus is a replica's own view of its Raft group.
type MemberStatus struct {
	Role         Role
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastLogIndex uint64
	// SnapshotIndex is the index of the replica's latest snapshot (0:
	// none, or unknown while it hibernates).
	SnapshotIndex uint64
	// MachineVersion is the queue machine version the replica has
	// applied (raftq/version.go); 0 while it hibernates.
	MachineVersion uint32
}
