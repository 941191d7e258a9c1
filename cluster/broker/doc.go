// Package broker is the node's AMQP model: users and their permissions,
// vhosts with their exchanges, bindings and queues, routing, and the rules
// of declaring and deleting them. The AMQP connection layer (amqp/server)
// drives it; queues themselves sit behind the queue.Queue boundary.
//
// Errors returned to the protocol layer are *amqp.Error values carrying
// RabbitMQ's reply codes and texts.
//
// # Parts
//
// Broker is a small core (the metadata store, the configuration, the log,
// the broker's lifetime) with parts embedded in it, each owning its state
// and the lock that guards it. They are embedded so that their exported
// methods are the broker's API, as the node and the connection layer call
// it; a part reaches the others through its pointer back to the core.
//
//   - accessControl (access.go, auth.go, user limits in limits.go): the
//     users and their permissions, and the hook that closes a deleted
//     user's or vhost's connections. Its own lock.
//   - vhostTable (vhosts.go, vhost limits in limits.go): the vhosts by
//     name; adding and deleting them. Its own lock.
//   - nodeTable (nodes.go): the drained nodes' records. Its own lock.
//   - resources (resources.go): the resource alarms and the memory
//     budget in-memory queues charge.
//   - transientQueues (remote.go): this node's in-memory queues that
//     other nodes reach, and removing the records of transient queues
//     that died with a start of their node.
//   - policyOps (policy_ops.go): policies as an operator sets and lists
//     them, and the loop that hands a queue its policies' arguments once
//     this node leads it.
//   - metadataApplier (replicated.go, seed.go): restoring the model at a
//     start, applying what the store's subscriber hands over (other
//     nodes' changes, whole snapshots), and seeding the first metadata.
//   - freshness (freshness.go, the core's fresh field): whether the
//     model may lag the replicated metadata, and catching it up.
//
// The core itself lists entities for operators (listing.go), places new
// replicated queues (placement.go), records queue membership changes
// (members.go) and imports and exports definitions (import.go, export.go;
// the document itself in definitions.go).
//
// A Vhost is its name, default queue type and limits (vhost.go) with three
// parts embedded the same way, all guarded by the vhost's one lock:
//
//   - queueTable (queues.go, queue.go, queuetypes.go, queueengine.go):
//     the queues; declaring, looking up, purging and deleting them, and
//     the engine behind each.
//   - exchangeGraph (exchanges.go, bindings.go, routing.go,
//     deadletter.go; the exchange types in exchange.go, exchangetypes.go,
//     headers.go): the exchanges and bindings, and routing through them.
//   - vhostPolicies (policy_apply.go; the rules in policy.go): the
//     policies and carrying them to queues and exchanges.
//
// The vhost's lock is not split among its parts: a publish routes through
// exchanges to queues under the read lock, and deleting a queue (its
// bindings go too) or changing a policy (every queue's and exchange's
// arguments are recomputed) changes several parts at once.
//
// # Lock order
//
// A goroutine takes these locks in this order, and never two vhosts' locks
// at once:
//
//  1. freshness's lock, held while a catch-up waits for the store's
//     subscriber; the subscriber takes vhost locks to apply changes, so
//     nothing catches up with a vhost's lock held.
//  2. A vhost's lock (Vhost.mu). Under it, changes are written to the
//     store (Vhost.persist), so that the store's order is the model's.
//  3. Under a vhost's lock: accessControl's (permission checks while
//     binding), nodeTable's (whether this node is drained, when a
//     replica opens) and servedQueues' locks. nodeTable's is also held
//     across a store commit (SetDraining). None of them is held while
//     taking another.
//
// vhostTable's lock is held only to read or change the map of vhosts,
// never while taking another lock; a vhost found there is locked after it
// is released.
//
// # Storage and replication tuning
//
// The broker owns no storage and no replication tuning. The node opens a
// standalone node's write-ahead log (a cluster member's belongs to its
// cluster) and closes it after the broker; the log, the payload cache and
// publish lingering reach the broker as one replica.Config,
// Config.Replica, which it copies for each replicated queue, adding only
// what is the queue's own (name, directory, arguments, callbacks). The
// node decides how queues store and replicate; the broker, what they are.
package broker
