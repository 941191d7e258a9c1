// Package classic is Warren's classic queue: a queue that lives in the memory
// of one node. The broker uses it for exclusive, auto-delete and server-named
// reply queues and for non-durable queues; nothing it holds survives a restart.
//
// A Queue keeps its messages in three places, and every message is in exactly
// one of them until it is gone:
//
//   - ready: waiting for a consumer. Messages that came back (nack, reject,
//     a closed channel) sit in a min-heap by ID and are served before the
//     never-delivered ones, which sit in a ring buffer in publish order.
//   - unsettled: handed to a consumer or to basic.get and not yet acked,
//     in a map from message ID to the message and its owner.
//   - gone: acked, discarded, purged, or taken with no-ack.
//
// Consumers wait in a line per priority level (see lineup.go); only those
// that can take a message right now (they have credit and are not blocked)
// stand in a line, so picking the next consumer costs O(levels), not
// O(consumers).
//
// Locking: one sync.Mutex per Queue guards everything. Consumer.Deliver is
// called with it held, as the queue.Consumer contract says; Consumer.Gone
// and Options.OnUnused are called after it is released, because both lead
// the caller back into the broker (a basic.cancel frame, a queue delete).
package classic
