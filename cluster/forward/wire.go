// Package forward carries every operation on a replicated queue to the node
// whose member leads the queue's Raft group. A Router is the queue.Queue the
// broker hands AMQP channels on every node; it calls this node's member
// directly when it leads, and otherwise talks over gRPC (proto/queuepb) to
// the leader node's Server.
//
// A Router is built of parts that each own their state (router.go lists
// them): a leaderFinder for where the group is led from, a publisher, a
// consumerSet of the consumers that follow the leader, and the settlers
// by delivery ID (settlements) and by holder (ownedSettler). The Server
// (server.go) serves the members this node holds, and keeps what the
// consumers of broken streams hold for them (disconnected.go).
//
// Goroutines: a Router runs one publishing goroutine, one goroutine for
// each kind of settlement and, while a publish stream is open, its
// receiver; each of its consumers runs one goroutine (its attachment's
// receiver, re-attaching when leadership moves) plus, while attached
// remotely, one sender. The Server runs two goroutines per stream. None
// is started per message.
//
// Lock order: a Local's own locks (it calls Deliver, done callbacks and
// LeaderLost with them held) come before any lock of this package; this
// package never calls into a Local, nor blocks, with one of its locks held,
// except publisher.seqMu, which is held across Local.EnqueueAs to keep seq
// order equal to log order (publisher.mu nests inside it).
package forward

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// Local is what forwarding needs of this node's member of a group
// (*replica.Replica satisfies it).
type Local interface {
	queue.Queue
	EnqueueAs(ctx context.Context, m *queue.Message, publisher, seq uint64, done func(error)) error
	IsLeader() bool
	Leader() string
	// Reconfigure commits the queue's new effective x-arguments (a policy
	// changed) to its log; only the leader can.
	Reconfigure(args wire.Table) error
	// SettleHeld settles messages by the consumer holding them: what a
	// former leader's member passed on (replica/former.go); only the
	// leader can.
	SettleHeld(list []replica.HeldSettlement) error
	// Deliveries lists the deliveries the consumer with this ID holds,
	// whichever leader handed them out.
	Deliveries(consumer uint64) []uint64
	// GetAs is Get with the message checked out to getter, an ID the
	// asking node chose (replica/owned.go).
	GetAs(getter uint64, noAck bool) (queue.Delivery, uint32, bool, error)
	// SettleOwned commits settlements named by the consumer ID holding
	// the message (basic.gets, closed channels' consumers); only the
	// leader can.
	SettleOwned(list []replica.OwnedSettlement) error
	// Knows reports whether the member knows every delivery in ids as
	// held: it has applied their handing-out, and they are not settled.
	Knows(ids []uint64) bool
	// DisconnectedTimeout is how long the deliveries of a consumer whose
	// stream broke wait for it to attach again before they return to
	// the queue (replica/disconnected.go); zero returns them at once.
	DisconnectedTimeout() time.Duration
	// Disconnect takes away a consumer whose stream broke: detached, or
	// kept in its place (an exclusive or single active consumer), which
	// it reports; a kept one that does not come back is declared down
	// (SettleOwned with its ID). Attached reports whether the consumer
	// with this ID came back, Suspended whether it is kept suspended
	// (handed nothing meanwhile; not before the queue's machine version
	// 2, when it stays attached and what it is handed waits for it too).
	Disconnect(c queue.Consumer) (kept bool)
	Attached(consumer uint64) bool
	Suspended(consumer uint64) bool
}

// ErrReconfigureUnsupported: the leading member's node cannot change a
// queue's configuration while it runs (a node of an older version, whose
// Forward service lacks Reconfigure).
var ErrReconfigureUnsupported = errors.New("forward: queue cannot be reconfigured")

// errNotLeader stands for a member's "not the leader" answer.
var errNotLeader = errors.New("forward: not the leader")

// errNoQueue is a node's answer for a queue it has no member of.
var errNoQueue = errors.New("forward: queue not on this node")

// isNotLeader reports whether err is a member's refusal because it does
// not lead (replica.ErrNotLeader, or raft's "node is not the leader").
func isOutOfSequence(err error) bool { return errors.Is(err, replica.ErrOutOfSequence) }

func isNotLeader(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, errNotLeader) || errors.Is(err, replica.ErrNotLeader) ||
		errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost)
}

var reasons = []struct {
	err    error
	reason queuepb.Reason
	code   codes.Code
}{
	{errNotLeader, queuepb.Reason_NOT_LEADER, codes.FailedPrecondition},
	{errNoQueue, queuepb.Reason_NO_QUEUE, codes.NotFound},
	{queue.ErrExclusiveConsumer, queuepb.Reason_EXCLUSIVE_CONSUMER, codes.PermissionDenied},
	{queue.ErrInUse, queuepb.Reason_IN_USE, codes.FailedPrecondition},
	{queue.ErrNotEmpty, queuepb.Reason_NOT_EMPTY, codes.FailedPrecondition},
	{queue.ErrDeleted, queuepb.Reason_DELETED, codes.NotFound},
	{queue.ErrRejected, queuepb.Reason_REJECTED, codes.FailedPrecondition},
	{queue.ErrGetUnsupported, queuepb.Reason_GET_UNSUPPORTED, codes.FailedPrecondition},
}

// toStatus turns a member's error into the call's status; leader is the
// leader the member knows, sent along with NOT_LEADER.
func toStatus(err error, leader string) error {
	if err == nil {
		return nil
	}
	if isNotLeader(err) {
		err = errNotLeader
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			st := status.New(r.code, err.Error())
			if d, derr := st.WithDetails(&queuepb.Failure{Reason: r.reason, Leader: leader}); derr == nil {
				st = d
			}
			return st.Err()
		}
	}
	return status.Error(codes.Internal, err.Error())
}

// failure is how a call's error reads to the router.
type failure struct {
	err error // a queue.Err* value, errNotLeader, errNoQueue, or the error itself
	// retry: the leader is elsewhere or unreachable; resolve it again.
	retry  bool
	leader string // the leader the answering member knows, if any
}

func fromStatus(err error) failure {
	if err == nil {
		return failure{}
	}
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return failure{err: err, retry: true}
		}
		return failure{err: err}
	}
	for _, d := range st.Details() {
		if f, ok := d.(*queuepb.Failure); ok {
			for _, r := range reasons {
				if r.reason == f.Reason {
					retry := r.err == errNotLeader || r.err == errNoQueue
					return failure{err: r.err, retry: retry, leader: f.Leader}
				}
			}
		}
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted:
		return failure{err: fmt.Errorf("forward: leader unavailable: %s", st.Message()), retry: true}
	}
	return failure{err: fmt.Errorf("forward: %s", st.Message())}
}

func encodeMessage(m *queue.Message) (*queuepb.Message, error) {
	h, err := wire.AppendContentHeader(nil, &wire.ContentHeader{ClassID: wire.ClassBasic, Properties: m.Properties})
	if err != nil {
		return nil, fmt.Errorf("forward: encode properties: %w", err)
	}
	return &queuepb.Message{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Properties: h, Body: m.Body}, nil
}

func decodeMessage(pm *queuepb.Message) (*queue.Message, error) {
	if pm == nil {
		return nil, errors.New("forward: delivery without a message")
	}
	h, err := wire.DecodeContentHeader(pm.Properties)
	if err != nil {
		return nil, fmt.Errorf("forward: decode properties: %w", err)
	}
	return &queue.Message{Exchange: pm.Exchange, RoutingKey: pm.RoutingKey, Properties: h.Properties, Body: pm.Body}, nil
}

func encodeDelivery(d queue.Delivery) (*queuepb.Delivery, error) {
	m, err := encodeMessage(d.Message)
	if err != nil {
		return nil, err
	}
	return &queuepb.Delivery{Id: d.ID, Redelivered: d.Redelivered, Message: m}, nil
}

func decodeDelivery(pd *queuepb.Delivery) (queue.Delivery, error) {
	m, err := decodeMessage(pd.Message)
	if err != nil {
		return queue.Delivery{}, err
	}
	return queue.Delivery{ID: pd.Id, Redelivered: pd.Redelivered, Message: m}, nil
}

func encodeOptions(queueID string, o queue.ConsumeOptions) (*queuepb.Attach, error) {
	a := &queuepb.Attach{QueueId: queueID, Tag: o.Tag, NoAck: o.NoAck, Exclusive: o.Exclusive, Prefetch: o.Prefetch, Priority: o.Priority, ConsumerId: o.ID, LastDelivery: o.LastDelivery}
	if len(o.Arguments) > 0 {
		b, err := wire.AppendTable(nil, o.Arguments)
		if err != nil {
			return nil, fmt.Errorf("forward: encode consumer arguments: %w", err)
		}
		a.Arguments = b
	}
	return a, nil
}

func decodeOptions(a *queuepb.Attach) (queue.ConsumeOptions, error) {
	o := queue.ConsumeOptions{Tag: a.Tag, NoAck: a.NoAck, Exclusive: a.Exclusive, Prefetch: a.Prefetch, Priority: a.Priority, ID: a.ConsumerId, LastDelivery: a.LastDelivery}
	if len(a.Arguments) > 0 {
		t, _, err := wire.DecodeTable(a.Arguments)
		if err != nil {
			return o, err
		}
		o.Arguments = t
	}
	return o, nil
}

// settleOn applies one settlement to q.
func settleOn(q queue.Queue, s *queuepb.Settlement) {
	switch s.Op {
	case queuepb.SettleOp_SETTLE:
		q.Settle(s.Ids)
	case queuepb.SettleOp_REQUEUE:
		q.Requeue(s.Ids, queue.ReturnCause(s.Cause))
	case queuepb.SettleOp_DISCARD:
		q.Discard(s.Ids, queue.ReturnCause(s.Cause))
	}
}

// heldOps pairs the wire's settle operations with the machine's.
var heldOps = [...]struct {
	wire queuepb.SettleOp
	op   raftq.Op
}{
	{queuepb.SettleOp_SETTLE, raftq.OpSettle},
	{queuepb.SettleOp_REQUEUE, raftq.OpReturn},
	{queuepb.SettleOp_DISCARD, raftq.OpDiscard},
	{queuepb.SettleOp_DEAD_LETTERED, raftq.OpDeadLetterSettled},
}

// encodeHeld and decodeHeld carry replica.HeldSettlement.
func encodeHeld(list []replica.HeldSettlement) []*queuepb.HeldSettlement {
	out := make([]*queuepb.HeldSettlement, 0, len(list))
	for _, h := range list {
		out = append(out, &queuepb.HeldSettlement{Op: opWire(h.Op), Cause: uint32(h.Cause), Consumer: uint64(h.Consumer), Messages: h.Messages})
	}
	return out
}

func decodeHeld(list []*queuepb.HeldSettlement) []replica.HeldSettlement {
	out := make([]replica.HeldSettlement, 0, len(list))
	for _, h := range list {
		out = append(out, replica.HeldSettlement{Op: opOf(h.Op), Cause: queue.ReturnCause(h.Cause), Consumer: raftq.ConsumerID(h.Consumer), Messages: h.Messages})
	}
	return out
}

// opWire is the wire's settle operation for a machine's (settle when op
// is none of them).
func opWire(op raftq.Op) queuepb.SettleOp {
	for _, p := range heldOps {
		if p.op == op {
			return p.wire
		}
	}
	return queuepb.SettleOp_SETTLE
}

// opOf is the machine's operation for a wire's (settle when unknown).
func opOf(op queuepb.SettleOp) raftq.Op {
	for _, p := range heldOps {
		if p.wire == op {
			return p.op
		}
	}
	return raftq.OpSettle
}

func encodeOwned(list []replica.OwnedSettlement) []*queuepb.OwnedSettlement {
	out := make([]*queuepb.OwnedSettlement, 0, len(list))
	for _, g := range list {
		out = append(out, &queuepb.OwnedSettlement{Op: opWire(g.Op), Cause: uint32(g.Cause), Owner: uint64(g.Owner), Delivery: g.Delivery})
	}
	return out
}

func decodeOwned(list []*queuepb.OwnedSettlement) []replica.OwnedSettlement {
	out := make([]replica.OwnedSettlement, 0, len(list))
	for _, g := range list {
		out = append(out, replica.OwnedSettlement{Op: opOf(g.Op), Cause: queue.ReturnCause(g.Cause), Owner: raftq.ConsumerID(g.Owner), Delivery: g.Delivery})
	}
	return out
}
