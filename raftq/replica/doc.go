// Package replica runs this node's member of one quorum queue's Raft group:
// a hashicorp/raft instance whose FSM is the raftq state machine, a log
// store that keeps the entries of live messages (their bodies) through
// compaction, and the runtime around the machine that implements the
// queue.Queue boundary: it proposes commands, waits for their commit before
// confirming publishes, and carries out the machine's effects (deliveries,
// confirms, cancellations) on the leader.
//
// Concurrency: raft's FSM goroutine applies entries and runs effects while
// holding fsm.mu; proposers (AMQP readers) only call raft.Apply and wait on
// futures; the machine's Confirm effects, applied on the FSM goroutine,
// turn committed enqueues into publisher confirms in log order; the
// watcher's goroutine proposes Tick on the leader when the machine's next
// deadline is due; a dead-letter goroutine publishes dead-lettered
// messages through the broker, which can block, off the FSM goroutine
// (deadletter.go). Consumers hear of a consumer timeout
// (queue.Consumer.TimedOut) and of the queue's deletion on goroutines of
// their own, never under a replica lock.
//
// # Pieces
//
// Replica is the queue.Queue and the API the node uses. What it does is
// split into parts, each owning its fields and the locks that guard them;
// a part points back at the core, or at the Replica when it coordinates
// with other parts.
//
//   - core (core.go, membership.go), embedded in Replica: the queue's name
//     and Config, the raft member and the fsm, the replica's lifetime
//     (done, the wait group, stopped), consumer IDs. Its helpers (propose,
//     wait, isLeader), machine queries and membership calls are Replica's
//     API through the embedding. goMu guards goStopped: no goroutine
//     starts once shutdown waits for them.
//   - fsm (fsm.go, effects.go): the machine, applied on raft's FSM
//     goroutine under fsm.mu, which also guards dlxOnReject and the
//     dead-letterer's live flag. effectHandlers maps each effect kind to
//     its handler.
//   - publishes, r.pub (publish.go, linger.go, committail.go): the publish
//     pipeline. pub.mu keeps numbering in log order and guards the
//     publishes held for company; pub.pendMu guards the pending confirms.
//   - consumerTable, r.consumers (consumers.go, former.go, disconnected.go,
//     owned.go): the consumers attached here, their acknowledgements and a
//     new leader's orphans, all under consumers.mu; consumers.attachMu
//     orders attaches with the detaches and suspends they must follow.
//   - settler, r.settler (settler.go, unknown.go, former.go): proposes
//     acknowledgements in batches (proposeMu), and passes on or holds the
//     settlements this member cannot carry out (unapplied.mu).
//   - stores, r.storage (stores.go, snapshot.go, logstore.go, recent.go,
//     checkpoint.go, boltimport.go): the log and stable store, the
//     snapshots, the payload cache (its own mu), snapshot and checkpoint
//     counters.
//   - watcher, r.watch (watch.go, leading.go): notices leadership changes
//     and due deadlines, and runs onLeading and onFollowing; its wake
//     flags are atomic, the rest is its goroutine's.
//   - failover, r.fo (failover.go, drain.go, reload.go): prompt elections
//     and draining. fo.mu guards the drain state and serialises every
//     change to raft's reloadable config.
//   - upgrader, r.upgrade (version.go): raising the machine version.
//   - deadLetterer, r.dl (deadletter.go): publishing dead letters; its mu
//     is never held while calling out.
//
// Open (open.go) builds them in steps; Replica's own methods are the
// queue.Queue boundary (replica.go) and the calls that span parts.
//
// Lock order: consumers.attachMu, then fsm.mu, then any of consumers.mu,
// pub.pendMu, the payload cache's mu, deadLetterer.mu and core.goMu (the
// FSM goroutine takes them while it applies); settler.proposeMu, then
// consumers.mu or pub.mu; pub.mu, then pub.pendMu.
package replica
