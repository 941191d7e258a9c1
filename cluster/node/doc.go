// Package node assembles one Warren node: its metadata store, the broker
// model and the AMQP listener. cmd/warren runs one; tests start several in
// one process.
//
// # Parts
//
// Node (node.go) is the running node: the broker, the AMQP server, the
// resource monitors, and the methods cmd/warren, cluster/exporter and the
// tests call. On a cluster member it holds a clusterNode, whose parts
// each keep their own state:
//
//   - clusterNode (cluster.go), the core the others point back to: the
//     configuration, the internal gRPC server and the peers' connections,
//     the Raft transport, the metadata group and its leader's duties
//     (join, lead), gossip, the forward service, the queues' write-ahead
//     log, and the stop channel and wait group every background loop
//     uses. It implements broker.Cluster and server.ReplyRelay.
//   - replicaHost (replicas.go, and hibernate.go for sleeping and waking)
//     owns this node's queues: their routers (clusterQueue,
//     clusterqueue.go), the replicas open here, those closed while their
//     group hibernates, and the opening and removal of replicas' files.
//   - hibernator (hibernate.go) puts idle groups this node leads to
//     sleep; it owns the counts of replicas closed and opened that its
//     loop frees memory by.
//   - queueMembership (membership.go, memberservice.go) drives the
//     membership changes of queue groups and asks members about their
//     groups over the Member service; it owns the lock that makes those
//     changes one at a time.
//   - failover (failover.go) reacts to gossip's news of another node's
//     failure or restart, and owns the record of node starts that are
//     over. Hand-off of this node's leaderships (handoff.go) and
//     maintenance mode (drain.go) are the core's and Node's.
//   - reconciler (reconcile.go) grows queues towards their target size
//     and rebalances leaders after a node rejoins; it owns what gossip
//     events asked of it.
//   - adminBackend (admin.go) answers warrenctl: one part per area
//     (admin_*.go, access.go, entities.go, definitions.go, alarms.go,
//     drain.go), each holding only what it reads; lateBackend
//     (latebackend.go) stands in for it until the broker exists.
//
// # Lock order
//
// A lock may be taken while holding those before it, never the reverse:
//
//  1. queueMembership.mu, held across a whole membership change;
//  2. clusterQueue.mu, held across every change of a queue's replica
//     (opening, waking, sleeping, removal);
//  3. replicaHost.groupMu, held while a replica opens and while
//     removeOrphans drops groups;
//  4. replicaHost.mu, over the routers, open replicas and sleepers.
//
// failover.mu, reconciler.mu and lateBackend.mu are leaves: nothing else
// is taken under them. The hibernator's counts are atomic.
package node
