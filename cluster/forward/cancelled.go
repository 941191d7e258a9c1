package forward

import "github.com/warrenmq/warren/raftq/queue"

// maxCancelled bounds the cancelled consumers a router remembers for
// channels that stay open: a channel that consumes and cancels without
// end must not grow the router without end. Past it the oldest is
// forgotten, and what it may still hold waits for its node to go away
// (Server.NodeGone) instead of its channel's close.
const maxCancelled = 4096

// cancelledSet remembers the consumer IDs of consumers cancelled with
// basic.cancel, by their handle, until their channel closes: a cancelled
// consumer keeps what it holds at the leader (RabbitMQ's too), and
// besides the deliveries its channel requeues, that can be a message
// whose acknowledgement an old leader lost, which only declaring the
// consumer down returns. Guarded by consumerSet.mu.
type cancelledSet struct {
	ids   map[queue.Consumer]uint64
	order []queue.Consumer // oldest first; may name handles taken since
}

func newCancelledSet() cancelledSet {
	return cancelledSet{ids: make(map[queue.Consumer]uint64)}
}

// add remembers c's consumer ID, forgetting the oldest past maxCancelled.
func (s *cancelledSet) add(c queue.Consumer, id uint64) {
	for len(s.ids) >= maxCancelled && len(s.order) > 0 {
		delete(s.ids, s.order[0])
		s.order[0] = nil
		s.order = s.order[1:]
	}
	if _, ok := s.ids[c]; !ok {
		s.order = append(s.order, c)
	}
	s.ids[c] = id
}

// take forgets c and returns its consumer ID, if it was remembered.
func (s *cancelledSet) take(c queue.Consumer) (uint64, bool) {
	id, ok := s.ids[c]
	if !ok {
		return 0, false
	}
	delete(s.ids, c)
	if len(s.order) > 2*len(s.ids)+16 {
		// Mostly taken handles: keep the live ones, in order.
		live := make([]queue.Consumer, 0, len(s.ids))
		for _, h := range s.order {
			if _, ok := s.ids[h]; ok {
				live = append(live, h)
			}
		}
		s.order = live
	}
	return id, true
}
