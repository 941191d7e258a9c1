// Package raftq will hold the quorum queue: a deterministic state machine
// (state, command) → (state, effects) replicated by its own Raft group.
//
// Until it lands, quorum queues are declared, recorded and validated as
// quorum queues by the broker but run on the single-node classic engine
// behind the same queue.Queue boundary (see cluster/broker/queues.go,
// newEngine). Nothing outside the queue packages changes when this package
// takes over.
package raftq
