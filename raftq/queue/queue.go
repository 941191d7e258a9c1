// Package queue is the queue-type boundary: the one interface through which the
// rest of the node publishes to, consumes from and manages a queue. Nothing
// outside the queue packages (classic, and raftq for quorum queues) knows how a
// queue stores its messages.
package queue

import (
	"context"
	"errors"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
)

// Message is one published message as a queue keeps it: the wire format's
// frames are gone, only what the publisher said remains.
type Message struct {
	Exchange   string
	RoutingKey string
	Properties wire.Properties
	Body       []byte
}

// Size is the number of body bytes, the unit of x-max-length-bytes.
func (m *Message) Size() int { return len(m.Body) }

// Delivery is a message handed to a consumer or to basic.get.
type Delivery struct {
	// ID identifies the delivery inside its queue for settlement (Settle,
	// Requeue, Discard). It is unique for the life of the queue. A quorum
	// queue gives each handing-out of a message its own ID, so that
	// settling a delivery the queue took back (consumer timeout) cannot
	// settle the message's later delivery to someone else.
	ID          uint64
	Message     *Message
	Redelivered bool
}

// Consumer receives deliveries from a queue. The AMQP channel implements it,
// one value per basic.consume; later, a forwarding stream to a remote node.
type Consumer interface {
	// Deliver hands over one message. It is called with the queue's internal
	// lock held: it must not block and must not call back into the queue. It
	// returns false when the consumer's outbound buffer is full; the message
	// is still delivered (the consumer owns it), but the queue sends the
	// consumer nothing more until Queue.Resume is called for it.
	Deliver(d Delivery) bool
	// Gone tells the consumer that the queue dropped it because the queue
	// itself was deleted (the channel sends basic.cancel where the client
	// supports it). Called without the queue lock held.
	Gone()
	// TimedOut tells the consumer that the queue cancelled it because a
	// delivery stayed unacknowledged longer than timeout (the consumer
	// timeout, x-consumer-timeout or 30 minutes, for both types). The
	// timed-out deliveries are back in the queue and settling them does
	// nothing; the consumer's other unsettled deliveries stay settleable.
	// The channel sends basic.cancel to a client that announced
	// consumer_cancel_notify and closes itself with 406 otherwise, as
	// RabbitMQ 4.3 does. Called without the queue lock held.
	TimedOut(timeout time.Duration)
}

// ConsumeOptions are basic.consume's settings as the queue needs them.
type ConsumeOptions struct {
	Tag       string
	NoAck     bool
	Exclusive bool
	// Prefetch bounds the consumer's unsettled deliveries; 0 is unlimited.
	Prefetch uint32
	// Priority is x-priority: higher priority consumers are served first.
	Priority  int32
	Arguments wire.Table
	// ID, when not 0, is the consumer's ID in a replicated queue, chosen
	// by the node whose channel consumes and kept as the consumer follows
	// the leadership: a new leader finds the consumer, and the messages
	// it holds, under the same ID (0: the queue picks one).
	ID uint64
	// LastDelivery, with ID, is the greatest delivery ID the consumer
	// has received: the messages it holds under greater IDs never reached
	// it and go back to the queue when it attaches.
	LastDelivery uint64
}

// Stats is a point-in-time count of a queue's contents.
type Stats struct {
	Ready     uint32 // messages waiting for a consumer (declare-ok's message-count)
	Unacked   uint32 // delivered and not yet settled
	Consumers uint32
	// DeadLettered are at-least-once dead letters the queue still holds
	// until their targets confirm them (RabbitMQ's messages_dlx).
	DeadLettered uint32
	// Delayed are returned messages waiting out a quorum queue's delayed
	// retry (RabbitMQ 4.3's messages_delayed): neither ready nor unacked.
	Delayed uint32
}

// ReturnCause says why a delivered message came back to its queue.
type ReturnCause uint8

const (
	ReturnNack         ReturnCause = iota // basic.nack / basic.recover with requeue
	ReturnReject                          // basic.reject with requeue
	ReturnConsumerGone                    // channel or connection closed with the message unsettled
	// ReturnDisconnected: the consumer was cut off from the leader for
	// longer than the consumer disconnected timeout (delivery-count
	// unchanged, as RabbitMQ 4.3 returns them; raftq.ReturnTimeout).
	ReturnDisconnected
)

// Errors a queue returns; the AMQP layer maps them to reply codes.
var (
	// ErrExclusiveConsumer: another consumer holds exclusive access (403).
	ErrExclusiveConsumer = errors.New("queue in exclusive use")
	// ErrInUse: delete with if-unused on a queue that has consumers (406).
	ErrInUse = errors.New("queue in use")
	// ErrNotEmpty: delete with if-empty on a queue holding messages (406).
	ErrNotEmpty = errors.New("queue not empty")
	// ErrDeleted: the queue was deleted (404).
	ErrDeleted = errors.New("queue deleted")
	// ErrRejected: the queue refused the message (overflow reject-publish):
	// the publisher gets basic.nack.
	ErrRejected = errors.New("message rejected by queue")
	// ErrGetUnsupported: basic.get on a queue that refuses it (a quorum
	// queue with single active consumer): 405 RESOURCE_LOCKED.
	ErrGetUnsupported = errors.New("basic.get not supported by this queue")
)

// NodeDownError: the node that holds an in-memory queue (its only copy)
// is down, or started again without it. RabbitMQ answers 404 NOT_FOUND,
// "home node ... is down or inaccessible", for a queue in that state.
type NodeDownError struct {
	Node string
	Why  string // "is dead", "has started again", ...
}

func (e *NodeDownError) Error() string { return "node " + e.Node + " " + e.Why }

// Confirm is how a queue tells the publisher's channel what became of a
// message it was handed: called exactly once, with nil once the message is
// safely stored (a classic queue before Enqueue returns; a quorum queue
// after its entry is committed by a majority and applied on the leader),
// or with the error (ErrRejected, ErrDeleted, ...) that makes the
// publisher's confirm a basic.nack. It must not block: it runs on the
// queue's goroutine, for a quorum queue raft's FSM goroutine. The AMQP
// channel's is publisher.confirmer; a forwarded publish's is the leader
// node's pubResults.done, whose answer travels back to the publisher's.
type Confirm = func(err error)

// Queue is the boundary every queue type implements. All methods are safe
// for concurrent use.
type Queue interface {
	// Enqueue stores m and calls confirm once it is stored or refused
	// (Confirm). Enqueue blocks while the queue is over its inbound limit,
	// until ctx is done: this is how backpressure reaches the socket.
	Enqueue(ctx context.Context, m *Message, confirm Confirm) error

	// Consume attaches c. The queue starts delivering at once.
	Consume(c Consumer, opts ConsumeOptions) error
	// Cancel detaches c. Its unsettled deliveries stay unsettled and may
	// still be settled or requeued by ID.
	Cancel(c Consumer)
	// Resume lets a consumer that returned false from Deliver receive again.
	Resume(c Consumer)

	// Get takes one message for basic.get. ok is false when the queue is
	// empty. remaining is the number of ready messages left after it.
	Get(noAck bool) (d Delivery, remaining uint32, ok bool, err error)

	// Settle acknowledges deliveries: they are gone for good.
	Settle(ids []uint64)
	// Requeue puts deliveries back, ahead of never-delivered messages,
	// marked redelivered.
	Requeue(ids []uint64, cause ReturnCause)
	// Discard drops deliveries that were rejected or nacked without
	// requeue (dead-lettered where the queue is configured for it). The
	// cause (ReturnReject or ReturnNack) matters to quorum queues:
	// basic.reject counts a failed delivery, basic.nack does not.
	Discard(ids []uint64, cause ReturnCause)

	// Purge removes every ready message and returns how many.
	Purge() (uint32, error)
	// Delete removes the queue's contents and stops it. It returns the
	// number of messages it held. ErrInUse and ErrNotEmpty are returned
	// for ifUnused and ifEmpty. Consumers get Gone.
	Delete(ifUnused, ifEmpty bool) (uint32, error)

	Stats() Stats

	// Close stops the queue on this node without deleting it (the node
	// is shutting down); its consumers are not told. Later calls fail
	// with ErrDeleted.
	Close()
}

// Movable is a consumer that can follow a replicated queue's leadership to
// another node: the forwarding router's consumers are. When the member a
// Movable consumer is attached to stops leading, the member forgets it and
// calls LeaderLost (without its locks held); the consumer attaches again
// to the new leader, and the messages it held come back to the queue,
// marked redelivered. A consumer that is not Movable gets Gone instead.
type Movable interface {
	Consumer
	LeaderLost()
}

// Releaser is implemented by queues whose consumers can hold messages
// their channel no longer knows of: a replicated queue's consumer that
// followed the leadership holds those whose acknowledgement was lost with
// an old leader. Release is Cancel for a closing channel: once the
// acknowledgements the channel sent had time to arrive, everything the
// consumer still holds returns to the queue, as RabbitMQ returns what a
// consumer whose channel went down held. The channel requeues the
// deliveries it knows of itself, as after Cancel.
//
// A closing channel releases the consumers it cancelled before as well
// (a cancelled consumer keeps what it holds, RabbitMQ's too, until its
// channel goes down), each once: Release of a consumer cancelled earlier
// returns what it still holds the same way.
type Releaser interface {
	Release(c Consumer)
}

// Origin is implemented by consumers attached on behalf of another node (a
// forwarded consume stream): Origin is the node whose channel consumes,
// for listings.
type Origin interface {
	Origin() string
}
