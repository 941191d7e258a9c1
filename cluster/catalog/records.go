// Package catalog holds the node's durable definitions — vhosts, users,
// permissions, exchanges, bindings and queue records — and the Store that
// keeps them across restarts. Today the Store is a local bbolt file; the
// cluster's replicated metadata group implements the same interface.
package catalog

import "errors"

// Vhost is a virtual host.
type Vhost struct {
	Name string `json:"name"`
	// DefaultQueueType is the type a durable queue gets when declared
	// without x-queue-type ("quorum" unless configured otherwise).
	DefaultQueueType string `json:"default_queue_type"`
	// Limits are the vhost's limits (rabbitmqctl set_vhost_limits), by
	// RabbitMQ's names: max-connections and max-queues. A limit that is
	// not there is no limit.
	Limits map[string]int64 `json:"limits,omitempty"`
}

// User is an account that may log in.
type User struct {
	Name string `json:"name"`
	// PasswordHash is RabbitMQ's rabbit_password_hashing_sha256 layout:
	// base64(salt[4] ++ sha256(salt ++ password)). Empty means the user
	// cannot log in with a password.
	PasswordHash string   `json:"password_hash"`
	Tags         []string `json:"tags,omitempty"`
	// Limits are the user's limits (rabbitmqctl set_user_limits), by
	// RabbitMQ's names: max-connections and max-channels. A limit that is
	// not there is no limit.
	Limits map[string]int64 `json:"limits,omitempty"`
}

// Permission grants a user access to a vhost: three regular expressions
// matched against resource names, as in RabbitMQ.
type Permission struct {
	User      string `json:"user"`
	Vhost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// Exchange is a declared exchange.
type Exchange struct {
	Vhost      string `json:"vhost"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
	Internal   bool   `json:"internal"`
	// Arguments is the AMQP field table, encoded, so that its value types
	// survive exactly (JSON would turn every number into a float).
	Arguments []byte `json:"arguments,omitempty"`
}

// DestinationKind says what a binding routes to.
type DestinationKind uint8

const (
	ToQueue DestinationKind = iota
	ToExchange
)

// Binding routes messages from an exchange to a queue or exchange.
type Binding struct {
	Vhost       string          `json:"vhost"`
	Source      string          `json:"source"`
	Destination string          `json:"destination"`
	Kind        DestinationKind `json:"kind"`
	RoutingKey  string          `json:"routing_key"`
	Arguments   []byte          `json:"arguments,omitempty"`
}

// Queue is a durable queue's record: what it is, not what it holds.
type Queue struct {
	Vhost      string `json:"vhost"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
	Arguments  []byte `json:"arguments,omitempty"`
	// Created is the declaration time in Unix milliseconds. A quorum
	// queue's replicas all start their state machine from it.
	Created int64 `json:"created,omitempty"`
	// ID names the queue's Raft group on every member. It is unique per
	// declaration, so that a queue deleted and declared again under the
	// same name never receives traffic meant for the old group.
	ID string `json:"id,omitempty"`
	// Members are the node names holding a replica (quorum queues, and
	// durable classic queues with their one member). Empty on records
	// written before clustering: the local node is then the only member.
	Members []string `json:"members,omitempty"`
	// Leader is the member chosen to lead when the group is created
	// (x-queue-leader-locator); it bootstraps the group. Leadership moves
	// afterwards without the record changing.
	Leader string `json:"leader,omitempty"`
	// Exclusive: the queue belongs to one connection on its node
	// (Members[0]); other connections, on any node, may publish to it
	// but not use it otherwise.
	Exclusive bool `json:"exclusive,omitempty"`
	// Boot is the start of its node (membership's Boot) that declared an
	// in-memory queue: a transient queue lives no longer than that
	// start, and a record left from an earlier one is stale.
	Boot string `json:"boot,omitempty"`
}

// Policy is a policy or (Operator) an operator policy of a vhost, as
// rabbitmqctl set_policy and set_operator_policy make them: the
// definition's keys apply to the queues and exchanges whose names match
// Pattern. Policies and operator policies are separate namespaces.
type Policy struct {
	Vhost    string `json:"vhost"`
	Name     string `json:"name"`
	Operator bool   `json:"operator,omitempty"`
	// Pattern is a regular expression matched against resource names.
	Pattern string `json:"pattern"`
	// ApplyTo is "queues", "classic_queues", "quorum_queues", "streams",
	// "exchanges" or "all".
	ApplyTo string `json:"apply_to"`
	// Definition is the keys and values, as an encoded AMQP field table
	// (like Exchange.Arguments) so that value types survive exactly.
	Definition []byte `json:"definition,omitempty"`
	Priority   int    `json:"priority"`
}

// Node is a cluster node's operator-set state (warrenctl drain). A node
// without a record is in service. Added after Policy, the same way.
type Node struct {
	Name string `json:"name"`
	// Draining (maintenance mode) keeps new queues off the node, moves
	// its queue leaderships away and suspends its AMQP listener.
	Draining bool `json:"draining,omitempty"`
}

// Snapshot is every record a Store holds.
type Snapshot struct {
	Vhosts      []Vhost
	Users       []User
	Permissions []Permission
	Exchanges   []Exchange
	Bindings    []Binding
	Queues      []Queue
	Policies    []Policy
	Nodes       []Node
}

// Change is one put or delete of exactly one record.
type Change struct {
	Delete bool
	// IfAbsent makes a put fail with ErrExists when a record with the
	// same key is already stored: two nodes declaring the same queue at
	// once must not both believe they created it.
	IfAbsent   bool
	Vhost      *Vhost
	User       *User
	Permission *Permission
	Exchange   *Exchange
	Binding    *Binding
	Queue      *Queue
	Policy     *Policy
	Node       *Node
}

// ErrExists is Apply's error for an IfAbsent put whose record exists.
var ErrExists = errors.New("metadata: record exists")

// Create returns a Change storing r only if no record with its key exists.
func Create(r any) Change { c := change(false, r); c.IfAbsent = true; return c }

// Put returns a Change storing r, which must be one of the record types
// (by value or pointer).
func Put(r any) Change { return change(false, r) }

// Del returns a Change deleting r.
func Del(r any) Change { return change(true, r) }

func change(del bool, r any) Change {
	c := Change{Delete: del}
	switch v := r.(type) {
	case Vhost:
		c.Vhost = &v
	case *Vhost:
		c.Vhost = v
	case User:
		c.User = &v
	case *User:
		c.User = v
	case Permission:
		c.Permission = &v
	case *Permission:
		c.Permission = v
	case Exchange:
		c.Exchange = &v
	case *Exchange:
		c.Exchange = v
	case Binding:
		c.Binding = &v
	case *Binding:
		c.Binding = v
	case Queue:
		c.Queue = &v
	case *Queue:
		c.Queue = v
	case Policy:
		c.Policy = &v
	case *Policy:
		c.Policy = v
	case Node:
		c.Node = &v
	case *Node:
		c.Node = v
	default:
		panic("metadata: not a record type")
	}
	return c
}

// Store keeps records across restarts. Apply is atomic: all of a batch's
// changes are kept, or none.
type Store interface {
	Load() (*Snapshot, error)
	Apply(changes ...Change) error
	Close() error
}
