// Package metaraft is the cluster-wide metadata Raft group: vhosts, users,
// permissions, exchanges, bindings and queue records, replicated to every
// node so that each routes from a local copy. Store implements
// catalog.Store on top of hashicorp/raft.
//
// # Pieces
//
//   - state.go: the state machine proper, a pure function of (state,
//     entry) with no Raft in it, and its deterministic snapshot bytes.
//   - entry.go: the log entry encoding (opcode byte plus JSON payload).
//   - fsm.go: the thin raft.FSM adapter, and the subscriber queue that
//     hands committed updates to the broker off raft's goroutine.
//   - store.go: Open, Close, Bootstrap and the read side.
//   - forward.go: proposals, forwarded to the leader's Meta gRPC service
//     when this node does not lead, retried across leader changes.
//   - membership.go: AddServer, RemoveServer, Servers.
//
// # Concurrency
//
// raft's FSM goroutine is the only writer of fsm.st (under fsm.mu);
// Load, Subscribe and Snapshot read it under the same lock. Updates are
// appended to the subscriber's queue under fsm.mu then subscriber.mu
// (that order, never the reverse) and delivered by the subscriber's own
// goroutine, so a slow subscriber never blocks raft. Store.confMu
// serialises membership changes made on this node while it leads, so two
// concurrent AddServer calls cannot both see room for a fifth voter.
//
// # Duplicates
//
// A proposal retried across a leader change may commit twice. Every
// proposal carries a random ID; the state machine remembers the outcome
// of the last recentProposals IDs (in its snapshots too) and answers a
// repeat with the first outcome without applying it again.
package metaraft
