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
// turn committed enqueues into publisher confirms in log order; a ticker goroutine on the leader proposes
// Tick when the machine's next deadline is due; a dead-letter goroutine
// publishes dead-lettered messages through the broker, which can block,
// off the FSM goroutine (deadletter.go). Consumers hear of a consumer
// timeout (queue.Consumer.TimedOut) and of the queue's deletion on
// goroutines of their own, never under a replica lock. Lock order:
// fsm.mu, then Replica.mu or deadLetterer.mu.
package replica
