package forward

import (
	"context"
	"sync"
	"time"

	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// consumerSet is a router's consumers, by the handle their channel
// consumes with, and the IDs of those cancelled while their channel stays
// open (cancelled.go), which the channel's close releases. It owns
// stopping a consumer: detaching it from the leader, and for a release
// declaring it down there once its acknowledgements can have arrived.
type consumerSet struct {
	r *Router // its leader, owned settler, lifetime and log

	mu       sync.Mutex
	closed   bool // the router stopped: no consumer attaches any more
	byHandle map[queue.Consumer]*consumer
	// cancelled holds the IDs of consumers cancelled while their channel
	// stays open, until the channel closes and releases them (Release).
	cancelled cancelledSet
}

// cancelWait bounds how long Cancel waits for a remote consumer's last
// deliveries.
const cancelWait = 5 * time.Second

// releaseGrace is how long a released consumer's acknowledgements have to
// reach the leader before what it holds is returned: a settlement
// lingers up to replica.SettleLinger on a stream and is one round trip
// away.
const releaseGrace = time.Second

// releaseWait bounds how long a release waits for the consumer's
// goroutine: an attach gives up after opTimeout, a cancel after
// cancelWait.
const releaseWait = opTimeout + cancelWait

func (s *consumerSet) init(r *Router) {
	s.r = r
	s.byHandle = make(map[queue.Consumer]*consumer)
	s.cancelled = newCancelledSet()
}

// Consume attaches c to the leader; it follows the leader from then on,
// until Cancel, Close or Delete.
func (r *Router) Consume(c queue.Consumer, opts queue.ConsumeOptions) error {
	if opts.ID == 0 && !opts.NoAck {
		// Its ID in the queue, the same at every leader it follows, so
		// that it keeps the messages it holds when the leader moves. (A
		// no-ack consumer holds nothing its channel knows of: the
		// leader settles each delivery as it sends it.)
		opts.ID = replica.ConsumerIDFor(r.cfg.SelfBoot)
	}
	a, err := encodeOptions(r.cfg.QueueID, opts)
	if err != nil {
		return err
	}
	a.Origin = r.cfg.Self
	w := &consumer{r: r, c: c, opts: opts, attach: a, stop: make(chan struct{}), lost: make(chan struct{}, 1), exited: make(chan struct{})}
	if !r.consumers.add(c, w) {
		return queue.ErrDeleted
	}
	ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
	defer cancel()
	if err := w.connect(ctx); err != nil {
		r.consumers.drop(c, w)
		w.mu.Lock()
		w.over = true
		w.mu.Unlock()
		close(w.stop)
		close(w.exited)
		if opts.ID != 0 {
			// An attempt that timed out here may still be applied at the
			// leader, with nothing on this node to settle or release what
			// the consumer is then handed: a chaos run stranded 96
			// messages with three such consumers, whose attaches were
			// committed 40 s after their nodes gave up on them. Declared
			// down, as a closed channel's consumer is; the leader applies
			// whatever was proposed before the release first
			// (replica.SettleOwned), so it is down for good.
			r.consumers.releaseAfterGrace(opts.ID)
		}
		return err
	}
	r.wg.Add(1)
	go w.run()
	return nil
}

// Cancel detaches c. Its unsettled deliveries stay settleable, and it
// keeps what it holds until its channel closes (Release).
func (r *Router) Cancel(c queue.Consumer) { r.consumers.stop(c, false) }

// Release detaches c, whose channel is closing, and then declares it
// down at the leader (owned.go) after releaseGrace: the acknowledgements
// its channel sent before closing, on this consumer's stream or another's
// (a node's settlements of a queue go to the stream of the latest
// delivery), are applied first, and whatever it still holds returns. c
// may have been cancelled before: it is declared down the same way.
func (r *Router) Release(c queue.Consumer) { r.consumers.stop(c, true) }

// Resume passes a local attachment's resume on. A remote leader's
// deliveries are bounded by the consumer's credit there.
func (r *Router) Resume(c queue.Consumer) {
	w := r.consumers.get(c)
	if w == nil {
		return
	}
	w.mu.Lock()
	local := w.mode == pathLocal
	w.mu.Unlock()
	if local {
		r.leaders.local().Resume(w)
	}
}

// add files w under c; false once the router has stopped.
func (s *consumerSet) add(c queue.Consumer, w *consumer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.byHandle[c] = w
	return true
}

// drop forgets c's consumer if it is still w.
func (s *consumerSet) drop(c queue.Consumer, w *consumer) {
	s.mu.Lock()
	if s.byHandle[c] == w {
		delete(s.byHandle, c)
	}
	s.mu.Unlock()
}

func (s *consumerSet) get(c queue.Consumer) *consumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byHandle[c]
}

// closeAll marks the set closed and returns, and forgets, every consumer.
func (s *consumerSet) closeAll() []*consumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	ws := make([]*consumer, 0, len(s.byHandle))
	for _, w := range s.byHandle {
		ws = append(ws, w)
	}
	clear(s.byHandle)
	return ws
}

// take forgets c's consumer and returns it. A cancel remembers its ID
// (cancelled.go); a release of a consumer no longer attached returns the
// ID remembered for it, if any (0 if none).
func (s *consumerSet) take(c queue.Consumer, release bool) (w *consumer, cancelledID uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w = s.byHandle[c]
	delete(s.byHandle, c)
	switch {
	case w == nil && release:
		cancelledID, _ = s.cancelled.take(c)
	case w != nil && !release && w.opts.ID != 0:
		s.cancelled.add(c, w.opts.ID)
	}
	return w, cancelledID
}

// stop detaches c's consumer (Cancel), and with release declares it down
// at the leader (Release).
func (s *consumerSet) stop(c queue.Consumer, release bool) {
	r := s.r
	w, cancelledID := s.take(c, release)
	if cancelledID != 0 {
		r.log.Debug("forward: releasing a cancelled consumer", "id", cancelledID)
		s.releaseAfterGrace(cancelledID)
		return
	}
	if w == nil {
		return
	}
	if id := w.opts.ID; release && id != 0 {
		// Whatever path the consumer is on, or none (between leaders: a
		// new leader declares it down after its own grace anyway). Only
		// once its goroutine is done: an attach still under way when the
		// consumer was stopped, applied after the release, would take
		// messages for a consumer nothing declares down any more (a
		// chaos run stranded 32 that way).
		defer s.releaseAfter(w, id)
	}
	w.mu.Lock()
	if w.over {
		w.mu.Unlock()
		return
	}
	w.over = true
	mode, a := w.mode, w.att
	w.mu.Unlock()
	close(w.stop)
	switch mode {
	case pathLocal:
		r.leaders.local().Cancel(w)
	case pathRemote:
		// The leader detaches, sends what it delivered until then, and
		// ends the stream.
		a.requestCancel()
		if !w.awaitExit(cancelWait) {
			r.log.Warn("forward: consumer cancel not answered in time", "consumer", w.opts.Tag)
			a.close()
		}
	}
	r.log.Debug("forward: consumer stopped", "consumer", w.opts.Tag, "id", w.opts.ID, "release", release, "path", mode, "last_delivery", w.last.Load())
}

// releaseAfterGrace declares the consumer with ID id down at the leader
// releaseGrace from now, once the acknowledgements sent before can have
// arrived.
func (s *consumerSet) releaseAfterGrace(id uint64) {
	time.AfterFunc(releaseGrace, func() { s.r.owned.release(id) })
}

// releaseAfter declares the released consumer w (its owner ID id) down at
// the leader releaseGrace after w's goroutine has returned, so after any
// attach it made; at most releaseWait after now, should it not return.
func (s *consumerSet) releaseAfter(w *consumer, id uint64) {
	go func() {
		if !w.awaitExit(releaseWait) {
			s.r.log.Warn("forward: released consumer still attaching; declaring it down anyway", "consumer", w.opts.Tag)
		}
		time.Sleep(releaseGrace)
		s.r.owned.release(id)
	}()
}
