package forward

import (
	"time"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// A consumer on another node reaches the leader through a Consume stream.
// When the stream breaks rather than ends (the link or the node went, a
// partition), the consumer's channel may be alive and come back, and
// RabbitMQ 4.3 keeps what such a consumer holds for the queue's consumer
// disconnected timeout (replica/disconnected.go): the Server takes the
// consumer away at once, so that nothing more reaches it (a single active
// or exclusive consumer keeping its place meanwhile, Local.Disconnect),
// and keeps its deliveries for it. Attaching again under its ID takes them over (the
// Consume of the router that follows the consumer); otherwise they return
// to the queue when the timeout passes, or at once when gossip reports
// its node restarted or gone, or without a timeout.

// SetNodeAlive gives the server gossip's view of the nodes: a node
// reported failed whose deliveries have waited out their timeout keeps
// them if it is back.
func (s *Server) SetNodeAlive(fn func(node string) bool) { s.alive.Store(&fn) }

func (s *Server) nodeAlive(node string) bool {
	fn := s.alive.Load()
	return fn != nil && (*fn)(node)
}

// SetStartGone tells the server which consumers' node starts are over
// (the node restarted since, or left): what such a consumer holds when
// its stream breaks returns at once.
func (s *Server) SetStartGone(fn func(consumer uint64) bool) { s.startGone.Store(&fn) }

func (s *Server) consumerGone(id uint64) bool {
	fn := s.startGone.Load()
	return id != 0 && fn != nil && (*fn)(id)
}

// disconnected takes care of what sc, whose stream broke, still holds.
func (s *Server) disconnected(l Local, sc *serverConsumer) {
	timeout := l.DisconnectedTimeout()
	if timeout <= 0 || s.consumerGone(sc.id) {
		s.letGo(l, sc, queue.ReturnConsumerGone)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return // the node stops: its members' successors see to it
	}
	s.suspended[sc] = time.AfterFunc(timeout, func() {
		s.giveBack(sc, queue.ReturnDisconnected, "the consumer disconnected timeout passed")
	})
	s.mu.Unlock()
	s.log.Info("forward: a consumer's stream broke; its deliveries wait for it", "queue", sc.queueID, "origin", sc.origin, "timeout", timeout)
}

// Suspended are the consumers of queue queueID whose streams broke and
// whose deliveries wait for them (RabbitMQ's suspected_down consumers):
// their IDs, with the node of each one's channel.
func (s *Server) Suspended(queueID string) map[uint64]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out map[uint64]string
	for sc := range s.suspended {
		if sc.queueID == queueID && sc.id != 0 {
			if out == nil {
				out = make(map[uint64]string)
			}
			out[sc.id] = sc.origin
		}
	}
	return out
}

// Close stops the timers of the consumers whose streams broke, as the
// node stops: a new leader returns what they hold, unless they follow.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for sc, t := range s.suspended {
		t.Stop()
		delete(s.suspended, sc)
	}
}

// giveBack returns to the queue, with cause, what the suspended consumer
// sc still holds: the deliveries it took over by attaching again are no
// longer its.
func (s *Server) giveBack(sc *serverConsumer, cause queue.ReturnCause, why string) {
	s.mu.Lock()
	t, ok := s.suspended[sc]
	delete(s.suspended, sc)
	s.mu.Unlock()
	if !ok {
		return
	}
	t.Stop()
	if !sc.kept && sc.held.countFor(sc) == 0 {
		return // nothing held that it did not take over again
	}
	l, err := s.member(sc.queueID, true)
	if err != nil {
		// A leader elected since declares the consumer down unless it
		// follows (replica's reapConsumers).
		sc.held.takeFor(sc)
		s.log.Warn("forward: cannot let go of a disconnected consumer here", "queue", sc.queueID, "origin", sc.origin, "err", err)
		return
	}
	if n := s.letGo(l, sc, cause); n > 0 {
		s.log.Info("forward: let go of a disconnected consumer", "queue", sc.queueID, "origin", sc.origin, "held", n, "why", why)
	}
}

// letGo returns to the queue, with cause, what the disconnected consumer
// sc holds and has not taken over by attaching again. A consumer kept in
// its place that has not come back is then declared down, which lets the
// next take its place: suspended meanwhile (Local.Disconnect), it was
// handed nothing, so what it held is back ahead of the ready messages
// first, and a single active consumer's successor gets the messages in
// order, their delivery-count as cause says (unchanged on this timeout,
// as RabbitMQ 4.3 leaves it). (Kept but not suspended, at machine version
// 1, it stands in its place: what it held would go back to it, so its
// going down returns it all, counted as a lost consumer's.) It returns
// how many of sc's deliveries there were.
func (s *Server) letGo(l Local, sc *serverConsumer, cause queue.ReturnCause) int {
	ids := sc.held.takeFor(sc)
	if sc.kept && l.Attached(sc.id) {
		return len(ids) // back in its place
	}
	if len(ids) > 0 && (!sc.kept || l.Suspended(sc.id)) {
		l.Requeue(ids, cause)
	}
	if sc.kept {
		if err := l.SettleOwned([]replica.OwnedSettlement{{Owner: raftq.ConsumerID(sc.id)}}); err != nil {
			s.log.Warn("forward: cannot declare a disconnected consumer down", "queue", sc.queueID, "origin", sc.origin, "err", err)
		}
	}
	return len(ids)
}

// NodeGone returns to their queues what consumers of node's channels hold
// and will not settle: those whose streams broke (above), and those
// cancelled with basic.cancel, which keep their unsettled deliveries for
// their channel to settle (a channel whose node stops or fails never
// will; its requeue, sent while the node shuts down, may be lost).
// Consumers whose streams are open give theirs back when the stream
// breaks. Called when gossip reports node restarted or gone: at once; or
// failed (failed): the node may only be cut off, and each queue's
// deliveries wait out its disconnected timeout first, kept should the
// node be back by then.
func (s *Server) NodeGone(node string, failed bool) {
	if node == "" {
		return
	}
	s.mu.Lock()
	var broken []*serverConsumer
	if !failed {
		for sc := range s.suspended {
			if sc.origin == node {
				broken = append(broken, sc)
			}
		}
	}
	queues := make([]string, 0, len(s.held))
	for q := range s.held {
		queues = append(queues, q)
	}
	s.mu.Unlock()
	for _, sc := range broken {
		s.giveBack(sc, queue.ReturnConsumerGone, "its node restarted or left")
	}
	for _, q := range queues {
		if !failed {
			s.returnCancelled(q, node, queue.ReturnConsumerGone)
			continue
		}
		if len(s.cancelledOf(q, node, false)) == 0 {
			continue // nothing to wait for (and no group to wake)
		}
		l, err := s.member(q, true)
		if err != nil {
			continue
		}
		timeout := l.DisconnectedTimeout()
		if timeout <= 0 {
			s.returnCancelled(q, node, queue.ReturnConsumerGone)
			continue
		}
		time.AfterFunc(timeout, func() {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if !closed && !s.nodeAlive(node) {
				s.returnCancelled(q, node, queue.ReturnDisconnected)
			}
		})
	}
}

// returnCancelled returns to queue q, with cause, the deliveries still
// held by node's consumers whose streams have ended (cancelled ones).
func (s *Server) returnCancelled(q, node string, cause queue.ReturnCause) {
	ids := s.cancelledOf(q, node, true)
	if len(ids) == 0 {
		return
	}
	l, err := s.member(q, true)
	if err != nil {
		s.log.Warn("forward: cannot return a gone node's deliveries", "queue", q, "node", node, "count", len(ids), "err", err)
		return
	}
	l.Requeue(ids, cause)
	s.log.Info("forward: returned deliveries a gone node's cancelled consumers held", "queue", q, "node", node, "count", len(ids))
}

// cancelledOf lists the deliveries of queue q that node's consumers whose
// streams have ended hold, and with take stops holding them.
func (s *Server) cancelledOf(q, node string, take bool) []uint64 {
	s.mu.Lock()
	h := s.held[q]
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []uint64
	for id, sc := range h.by {
		sc.mu.Lock()
		over := sc.end != endNone
		sc.mu.Unlock()
		if sc.origin == node && over {
			ids = append(ids, id)
			if take {
				delete(h.by, id)
			}
		}
	}
	return ids
}
