package forward

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// cancelWait bounds how long Cancel waits for a remote consumer's last
// deliveries.
const cancelWait = 5 * time.Second

// errCancelled: the consumer was cancelled while attaching.
var errCancelled = errors.New("forward: consumer cancelled")

// consumer is the router's wrapper of one queue.Consumer: the value it
// attaches to the leader, locally or through a Consume stream, and that
// follows leadership (queue.Movable). Its goroutine (run) receives a remote
// attachment's deliveries and attaches again when the leader moves.
type consumer struct {
	r      *Router
	c      queue.Consumer
	opts   queue.ConsumeOptions
	attach *queuepb.Attach
	stop   chan struct{} // closed once over
	lost   chan struct{} // LeaderLost of a local attachment
	exited chan struct{} // run returned
	// last is the greatest delivery ID handed to c: attaching to a new
	// leader, it says which of the deliveries held for it arrived.
	// Deliveries reach a consumer in the order of their IDs.
	last atomic.Uint64

	mu   sync.Mutex
	over bool // cancelled, closed, or told Gone/TimedOut: never attach again
	mode pathKind
	att  *attachment
}

var _ queue.Movable = (*consumer)(nil)

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
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return queue.ErrDeleted
	}
	r.consumers[c] = w
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
	defer cancel()
	if err := w.connect(ctx); err != nil {
		r.mu.Lock()
		if r.consumers[c] == w {
			delete(r.consumers, c)
		}
		r.mu.Unlock()
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
			r.releaseAfterGrace(opts.ID)
		}
		return err
	}
	r.wg.Add(1)
	go w.run()
	return nil
}

// Cancel detaches c. Its unsettled deliveries stay settleable, and it
// keeps what it holds until its channel closes (Release).
func (r *Router) Cancel(c queue.Consumer) { r.stopConsumer(c, false) }

// Release detaches c, whose channel is closing, and then declares it
// down at the leader (owned.go) after releaseGrace: the acknowledgements
// its channel sent before closing, on this consumer's stream or another's
// (a node's settlements of a queue go to the stream of the latest
// delivery), are applied first, and whatever it still holds returns. c
// may have been cancelled before: it is declared down the same way.
func (r *Router) Release(c queue.Consumer) { r.stopConsumer(c, true) }

// releaseGrace is how long a released consumer's acknowledgements have to
// reach the leader before what it holds is returned: a settlement
// lingers up to replica.SettleLinger on a stream and is one round trip
// away.
const releaseGrace = time.Second

func (r *Router) stopConsumer(c queue.Consumer, release bool) {
	r.mu.Lock()
	w := r.consumers[c]
	delete(r.consumers, c)
	switch {
	case w == nil && release:
		if id, ok := r.cancelled.take(c); ok {
			r.mu.Unlock()
			r.log.Debug("forward: releasing a cancelled consumer", "id", id)
			r.releaseAfterGrace(id)
			return
		}
	case w != nil && !release && w.opts.ID != 0:
		r.cancelled.add(c, w.opts.ID)
	}
	r.mu.Unlock()
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
		defer r.releaseAfter(w, id)
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
func (r *Router) releaseAfterGrace(id uint64) {
	time.AfterFunc(releaseGrace, func() { r.owned.release(id) })
}

// releaseAfter declares the released consumer w (its owner ID id) down at
// the leader releaseGrace after w's goroutine has returned, so after any
// attach it made; at most releaseWait after now, should it not return.
func (r *Router) releaseAfter(w *consumer, id uint64) {
	go func() {
		if !w.awaitExit(releaseWait) {
			r.log.Warn("forward: released consumer still attaching; declaring it down anyway", "consumer", w.opts.Tag)
		}
		time.Sleep(releaseGrace)
		r.owned.release(id)
	}()
}

// awaitExit waits up to d for w's goroutine to return, and says whether
// it did.
func (w *consumer) awaitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.exited:
		return true
	case <-t.C:
		return false
	}
}

// releaseWait bounds how long a release waits for the consumer's
// goroutine: an attach gives up after opTimeout, a cancel after
// cancelWait.
const releaseWait = opTimeout + cancelWait

// Resume passes a local attachment's resume on. A remote leader's
// deliveries are bounded by the consumer's credit there.
func (r *Router) Resume(c queue.Consumer) {
	r.mu.Lock()
	w := r.consumers[c]
	r.mu.Unlock()
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

// Deliver implements queue.Consumer for a local attachment.
func (w *consumer) Deliver(d queue.Delivery) bool {
	if d.ID != 0 {
		w.r.settles.noteOrigin(true, "", nil)
		w.last.Store(d.ID)
	}
	return w.c.Deliver(d)
}

// Gone implements queue.Consumer.
func (w *consumer) Gone() { w.end(func(c queue.Consumer) { c.Gone() }) }

// TimedOut implements queue.Consumer.
func (w *consumer) TimedOut(timeout time.Duration) {
	w.end(func(c queue.Consumer) { c.TimedOut(timeout) })
}

// LeaderLost implements queue.Movable: the local member stopped leading
// and forgot the consumer; run attaches it to the new leader.
func (w *consumer) LeaderLost() {
	select {
	case w.lost <- struct{}{}:
	default:
	}
}

// end stops the consumer for good and, unless tell is nil, tells c why,
// once.
func (w *consumer) end(tell func(queue.Consumer)) {
	w.mu.Lock()
	if w.over {
		w.mu.Unlock()
		return
	}
	w.over = true
	a := w.att
	w.mu.Unlock()
	close(w.stop)
	w.r.mu.Lock()
	if w.r.consumers[w.c] == w {
		delete(w.r.consumers, w.c)
	}
	w.r.mu.Unlock()
	if a != nil {
		a.close()
	}
	if tell != nil {
		tell(w.c)
	}
}

func (w *consumer) isOver() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.over
}

// connect attaches to the leader, resolving it again while the answer is
// "not leader" or unavailable, until ctx is done.
func (w *consumer) connect(ctx context.Context) error {
	r := w.r
	if w.opts.ID != 0 {
		w.opts.LastDelivery = w.last.Load()
		w.attach.LastDelivery = w.opts.LastDelivery
	}
	backoff := minBackoff
	for {
		t, err := r.leaders.resolve(ctx)
		if err != nil {
			return err
		}
		var f failure
		if t.local {
			select {
			case <-w.lost: // a stale signal of an earlier attachment
			default:
			}
			w.mu.Lock()
			if w.over {
				w.mu.Unlock()
				return errCancelled
			}
			// Deliveries may come before Consume returns.
			w.mode, w.att = pathLocal, nil
			w.mu.Unlock()
			err := r.leaders.local().Consume(w, w.opts)
			if err == nil {
				return nil
			}
			w.mu.Lock()
			w.mode = pathNone
			w.mu.Unlock()
			if !isNotLeader(err) {
				return err
			}
			f = failure{err: err, retry: true}
		} else {
			if w.isOver() {
				return errCancelled
			}
			if f = w.attachRemote(ctx, t.addr); f.err == nil {
				return nil
			}
			if !f.retry {
				return f.err
			}
			r.leaders.forget(f)
		}
		r.log.Debug("forward: consumer attach failed, retrying", "consumer", w.opts.Tag, "err", f.err)
		if werr := r.sleep(ctx, backoff); werr != nil {
			return fmt.Errorf("forward: queue %s: attach consumer: %w", r.cfg.Name, f.err)
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// attachRemote opens a Consume stream to the leader at addr.
func (w *consumer) attachRemote(ctx context.Context, addr string) failure {
	r := w.r
	c, err := r.leaders.client(addr)
	if err != nil {
		return failure{err: err}
	}
	sctx, scancel := context.WithCancel(r.ctx)
	stream, err := c.Consume(sctx)
	if err != nil {
		scancel()
		return fromStatus(err)
	}
	if err := stream.Send(&queuepb.ConsumeRequest{Attach: w.attach}); err != nil {
		scancel()
		return fromStatus(err)
	}
	stop := context.AfterFunc(ctx, scancel)
	rep, err := stream.Recv()
	stop()
	if err != nil {
		scancel()
		return fromStatus(err)
	}
	if !rep.Attached {
		scancel()
		return failure{err: errors.New("forward: consume stream did not start with attached"), retry: true}
	}
	a := &attachment{w: w, addr: addr, stream: stream, ctx: sctx, cancel: scancel, wake: make(chan struct{}, 1), flushAt: replica.SettleDueAt(replica.Credit(w.opts))}
	w.mu.Lock()
	if w.over {
		w.mu.Unlock()
		scancel() // the leader detaches and takes back what it sent
		return failure{err: errCancelled}
	}
	w.mode, w.att = pathRemote, a
	w.mu.Unlock()
	r.wg.Add(1)
	go a.sender()
	return failure{}
}

// run follows the leader until the consumer is over.
func (w *consumer) run() {
	r := w.r
	defer r.wg.Done()
	defer close(w.exited)
	for {
		w.mu.Lock()
		mode, a := w.mode, w.att
		w.mu.Unlock()
		switch mode {
		case pathLocal:
			select {
			case <-w.lost:
			case <-w.stop:
				return
			}
		case pathRemote:
			if !w.receive(a) {
				return
			}
		default:
			return
		}
		w.mu.Lock()
		w.mode, w.att = pathNone, nil
		w.mu.Unlock()
		if !w.reattach() {
			return
		}
	}
}

// reattach attaches to the new leader, with backoff, until it succeeds or
// the consumer is over.
func (w *consumer) reattach() bool {
	r := w.r
	backoff := minBackoff
	for {
		if w.isOver() || r.ctx.Err() != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
		err := w.connect(ctx)
		cancel()
		if err == nil {
			break
		}
		if w.isOver() || r.ctx.Err() != nil {
			return false
		}
		if errors.Is(err, queue.ErrExclusiveConsumer) || errors.Is(err, queue.ErrDeleted) {
			r.log.Warn("forward: consumer cannot follow the leader; cancelling it", "consumer", w.opts.Tag, "err", err)
			w.end(func(c queue.Consumer) { c.Gone() })
			return false
		}
		r.log.Debug("forward: consumer re-attach failed, retrying", "consumer", w.opts.Tag, "err", err)
		if r.sleep(r.ctx, backoff) != nil {
			return false
		}
		backoff = min(2*backoff, maxBackoff)
	}
	w.mu.Lock()
	over, mode, a := w.over, w.mode, w.att
	w.mu.Unlock()
	if over {
		// Cancelled while attaching: detach again.
		switch mode {
		case pathLocal:
			r.leaders.local().Cancel(w)
		case pathRemote:
			a.close()
		}
		return false
	}
	r.log.Debug("forward: consumer re-attached", "consumer", w.opts.Tag)
	return true
}

// receive hands a remote attachment's deliveries to the consumer until
// the stream ends; it reports whether to attach again.
func (w *consumer) receive(a *attachment) bool {
	r := w.r
	for {
		rep, err := a.stream.Recv()
		if err != nil {
			a.close()
			if w.isOver() {
				r.settles.attachmentEnded(a)
				return false
			}
			f := fromStatus(err)
			r.settles.attachmentEnded(a)
			r.leaders.forget(f)
			r.log.Debug("forward: consume stream ended; re-attaching", "consumer", w.opts.Tag, "err", err)
			return true
		}
		for _, pd := range rep.Deliveries {
			d, err := decodeDelivery(pd)
			if err != nil {
				r.log.Error("forward: undecodable delivery", "err", err)
				continue
			}
			if d.ID != 0 {
				r.settles.noteOrigin(false, a.addr, a)
				w.last.Store(d.ID)
			}
			w.c.Deliver(d)
		}
		switch {
		case rep.Gone:
			a.close()
			r.settles.attachmentEnded(a)
			w.end(func(c queue.Consumer) { c.Gone() })
			return false
		case rep.TimedOut:
			a.close()
			r.settles.attachmentEnded(a)
			timeout := time.Duration(rep.TimeoutMs) * time.Millisecond
			w.end(func(c queue.Consumer) { c.TimedOut(timeout) })
			return false
		}
	}
}

// attachment is one Consume stream; its sender goroutine carries
// settlements and the cancel to the leader.
type attachment struct {
	w      *consumer
	addr   string
	stream queuepb.Forward_ConsumeClient
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}

	mu        sync.Mutex
	out       []*queuepb.Settlement
	held      int // ids in out
	flushAt   int // held that makes out due at once (a quarter of the prefetch)
	cancelReq bool
	closed    bool
	// sent is what went on the stream lately (sender only): a stream the
	// leader ends may not have read the last of it, so close sends it again
	// the unary way. Settling twice changes nothing: a member forgets a
	// delivery's ID when it settles it.
	sent []sentSettlements
}

// sentSettlements are settlements put on the stream at a time.
type sentSettlements struct {
	at   time.Time
	list []*queuepb.Settlement
}

// resendWindow bounds how long settlements sent on a stream are kept for
// close: far longer than a message takes to cross a live stream.
const resendWindow = 250 * time.Millisecond

func (a *attachment) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Acknowledgements (SETTLE) gather for up to replica.SettleLinger before
// the sender puts them on the stream, by the rule the leader's settler
// gathers them by before it proposes them: nobody waits for them, and a
// stream message per basic.ack was a write here, a read and a wake-up on
// the leader's node. Requeues, discards and a cancel go at once, taking
// what gathered with them, and so do replica.SettleDueAt acknowledgements
// (a quarter of the consumer's credit at the leader).

// settle queues settlements for the stream; false once it cannot take
// them any more.
func (a *attachment) settle(op queuepb.SettleOp, cause queue.ReturnCause, ids []uint64) bool {
	a.mu.Lock()
	if a.closed || a.cancelReq {
		a.mu.Unlock()
		return false
	}
	first := len(a.out) == 0
	a.out = appendSettlement(a.out, op, cause, ids)
	a.held += len(ids)
	due := a.dueLocked()
	a.mu.Unlock()
	if first || due {
		a.signal()
	}
	return true
}

// dueLocked reports whether what gathered should go now; a.mu is held.
func (a *attachment) dueLocked() bool {
	if a.cancelReq || a.held >= a.flushAt {
		return true
	}
	for _, s := range a.out {
		if s.Op != queuepb.SettleOp_SETTLE {
			return true
		}
	}
	return false
}

// gather waits until what the stream holds is due or replica.SettleLinger has
// passed; false if the stream ended meanwhile.
func (a *attachment) gather() bool {
	a.mu.Lock()
	due := a.dueLocked() || len(a.out) == 0
	a.mu.Unlock()
	if due {
		return true
	}
	t := time.NewTimer(replica.SettleLinger)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-a.wake: // more came, or a cancel: due now?
			a.mu.Lock()
			due := a.dueLocked()
			a.mu.Unlock()
			if due {
				return true
			}
		case <-a.ctx.Done():
			return false
		}
	}
}

func (a *attachment) requestCancel() {
	a.mu.Lock()
	a.cancelReq = true
	a.mu.Unlock()
	a.signal()
}

// close ends the stream; settlements it did not send go the unary way.
func (a *attachment) close() {
	a.mu.Lock()
	a.closed = true
	out := a.out
	a.out, a.held = nil, 0
	sent := a.sent
	a.sent = nil
	a.mu.Unlock()
	a.cancel()
	for _, s := range sent {
		a.w.r.settles.sendUnary(a.addr, s.list)
	}
	a.w.r.settles.sendUnary(a.addr, out)
}

// noteSent keeps list, sent on the stream now, for close; older sends
// beyond resendWindow are dropped.
func (a *attachment) noteSent(list []*queuepb.Settlement) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	drop := 0
	for drop < len(a.sent) && now.Sub(a.sent[drop].at) > resendWindow {
		drop++
	}
	a.sent = append(a.sent[drop:], sentSettlements{at: now, list: list})
}

func (a *attachment) sender() {
	defer a.w.r.wg.Done()
	for {
		select {
		case <-a.wake:
		case <-a.ctx.Done():
			return
		}
		if !a.gather() {
			return
		}
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			return
		}
		out, cancel := a.out, a.cancelReq
		a.out, a.held = nil, 0
		a.mu.Unlock()
		if len(out) == 0 && !cancel {
			continue
		}
		if err := a.stream.Send(&queuepb.ConsumeRequest{Settlements: out, Cancel: cancel}); err != nil {
			a.w.r.settles.sendUnary(a.addr, out)
			return
		}
		if len(out) > 0 {
			a.noteSent(out)
		}
		if cancel {
			a.stream.CloseSend()
			return
		}
	}
}
