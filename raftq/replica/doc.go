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
// futures; a confirmer goroutine per replica turns committed enqueues into
// publisher confirms in log order; a ticker goroutine on the leader proposes
// Tick when the machine's next deadline is due. Lock order: fsm.mu, then
// Replica.mu.
package replica
