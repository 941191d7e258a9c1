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
	w.r.consumers.drop(w.c, w)
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
