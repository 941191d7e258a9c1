package forward

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq/queue"
)

// Bounds on a router's unconfirmed publishes: beyond them Enqueue blocks.
const (
	maxUnconfirmed      = 4096
	maxUnconfirmedBytes = 32 << 20
	// publishBatch bounds one PublishRequest.
	publishBatch      = 256
	publishBatchBytes = 1 << 20
)

// unconfirmed is a publish waiting for the leader's answer.
type unconfirmed struct {
	seq      uint64
	m        *queue.Message
	done     func(error) // nil once the publisher has been answered
	deadline time.Time
	// settled: the leader answered. A publish nacked at its deadline
	// stays until then, sent again as often as needed under its number.
	settled bool
}

type pathKind uint8

const (
	pathNone   pathKind = iota // resolve the leader, then (re)send from the oldest
	pathLocal                  // Local.EnqueueAs
	pathRemote                 // stream
)

// publisher numbers a router's publishes (publisher ID random, seq 1, 2,
// 3…) and keeps each until the leader answers it, to send it again after
// a leader change: the group stores a re-sent (publisher, seq) once.
//
// A publish that waits past PublishTimeout is nacked but kept, and sent
// on under its number until the leader answers: dropping it would leave a
// gap the group refuses to skip, and numbering the rest afresh under a
// new publisher ID would have the group store again those it already held
// under the old one (the chaos harness saw messages stored three times
// after a queue was leaderless for longer than the timeout). So the
// nacked publish may still be stored; a nack promises no more.
//
// Goroutines: Enqueue callers append, and call Local.EnqueueAs themselves
// while the local member leads and nothing waits to be (re)sent; run sends
// everything else; one receiver per publish stream takes answers.
type publisher struct {
	r *Router
	// seqMu orders calls of Local.EnqueueAs by seq; mu nests inside it.
	seqMu sync.Mutex

	mu     sync.Mutex
	closed bool
	id     uint64
	next   uint64
	q      []*unconfirmed // by seq, contiguous
	bytes  int
	sent   int // q[:sent] went to the current path
	path   pathKind
	gen    uint64 // counts path changes; answers of an older path's failures are ignored
	stream *pubStream
	// space is closed (and replaced) when room frees up, if anyone waits.
	space   chan struct{}
	waiters int
	wake    chan struct{}
	// refused counts the streams in a row that ended without an answer
	// (the member named as leader is not, or not yet): connect backs off
	// by it, rather than open stream after stream while the members'
	// views of the leadership disagree (a chaos run saw 840 a second).
	refused atomic.Int32
	// goneWarn and lateWarn pace expire's warnings (under mu): held_back
	// in a line counts the publishes its kind failed since the previous
	// line without a line of their own.
	goneWarn, lateWarn warnPace
	// started: run's goroutine is started on first use (Router.startOnce).
	started atomic.Bool
}

type pubStream struct {
	gen    uint64
	id     uint64
	stream queuepb.Forward_PublishClient
	cancel context.CancelFunc
}

func newPublisher(r *Router) *publisher {
	return &publisher{r: r, id: randomID(), next: 1, space: make(chan struct{}), wake: make(chan struct{}, 1)}
}

func (p *publisher) signal() {
	p.r.startOnce(&p.started, p.run)
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *publisher) enqueue(ctx context.Context, m *queue.Message, done func(error)) error {
	size := len(m.Body)
	p.mu.Lock()
	for !p.closed && len(p.q) > 0 && (len(p.q) >= maxUnconfirmed || p.bytes+size > maxUnconfirmedBytes) {
		space := p.space
		p.waiters++
		p.mu.Unlock()
		var err error
		select {
		case <-space:
		case <-ctx.Done():
			err = ctx.Err()
		}
		p.mu.Lock()
		p.waiters--
		if err != nil {
			p.mu.Unlock()
			done(err)
			return err
		}
	}
	if p.closed {
		p.mu.Unlock()
		done(queue.ErrDeleted)
		return queue.ErrDeleted
	}
	p.mu.Unlock()

	p.seqMu.Lock()
	defer p.seqMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		done(queue.ErrDeleted)
		return queue.ErrDeleted
	}
	u := &unconfirmed{seq: p.next, m: m, done: done, deadline: time.Now().Add(p.r.cfg.PublishTimeout)}
	p.next++
	p.q = append(p.q, u)
	p.bytes += size
	// The fast path: the local member leads and nothing is waiting to go
	// before this publish.
	local := p.path == pathLocal && p.sent == len(p.q)-1
	id, gen := p.id, p.gen
	if local {
		p.sent++
	}
	first := len(p.q) == 1
	p.mu.Unlock()
	if !local || first {
		// run sends it, or (first of a burst) starts the expiry checks.
		p.signal()
	}
	if !local {
		return nil
	}
	p.r.leaders.local().EnqueueAs(p.r.ctx, m, id, u.seq, p.localDone(id, gen, u.seq))
	return nil
}

// localDone answers a publish made through Local.EnqueueAs.
func (p *publisher) localDone(id, gen, seq uint64) func(error) {
	return func(err error) {
		switch {
		case err == nil, errors.Is(err, queue.ErrRejected), errors.Is(err, queue.ErrDeleted):
			p.answer(id, func(yield func(uint64, error)) { yield(seq, err) })
		case isOutOfSequence(err):
			p.restart(id)
		default:
			// Not the leader any more (or stopping): send it again, to
			// whoever leads.
			p.mu.Lock()
			if p.gen == gen {
				p.resetLocked()
			}
			p.mu.Unlock()
			p.signal()
		}
	}
}

// answer completes the publishes of publisher id that answers yields.
func (p *publisher) answer(id uint64, answers func(yield func(uint64, error))) {
	type call struct {
		done func(error)
		err  error
	}
	var calls []call
	p.mu.Lock()
	if id == p.id && len(p.q) > 0 {
		first := p.q[0].seq
		answers(func(seq uint64, err error) {
			if seq < first || seq-first >= uint64(len(p.q)) {
				return // answered before (a publish sent twice)
			}
			u := p.q[seq-first]
			u.settled = true
			if u.done != nil {
				calls = append(calls, call{u.done, err})
				u.done = nil
			}
		})
		p.popAnsweredLocked()
	}
	p.mu.Unlock()
	for _, c := range calls {
		c.done(c.err)
	}
}

// popAnsweredLocked drops the publishes the leader answered from the front.
func (p *publisher) popAnsweredLocked() {
	n := 0
	for n < len(p.q) && p.q[n].settled {
		p.bytes -= len(p.q[n].m.Body)
		p.q[n] = nil
		n++
	}
	if n == 0 {
		return
	}
	p.q = p.q[n:]
	p.sent = max(0, p.sent-n)
	p.freedLocked()
}

func (p *publisher) freedLocked() {
	if p.waiters > 0 {
		close(p.space)
		p.space = make(chan struct{})
	}
}

// resetLocked forgets the current path: everything unanswered is sent
// again once the leader is found.
func (p *publisher) resetLocked() {
	p.path = pathNone
	p.sent = 0
	p.gen++
	if p.stream != nil {
		p.stream.cancel()
		p.stream = nil
	}
}

// restart takes a new publisher ID and numbers the unanswered publishes
// from 1 again: the group refused a seq because one before it is missing
// (one that could not be encoded, or a group that lost its record), so
// the old numbering cannot continue. A publish the group stored under the
// old ID may be stored twice.
func (p *publisher) restart(id uint64) {
	p.mu.Lock()
	if p.id == id {
		p.renumberLocked()
	}
	p.mu.Unlock()
	p.signal()
}

func (p *publisher) renumberLocked() {
	p.id = randomID()
	for i, u := range p.q {
		u.seq = uint64(i + 1)
	}
	p.next = uint64(len(p.q) + 1)
	p.resetLocked()
}

// expire nacks the publishes past their deadline, which stay queued,
// under their numbers, until the leader answers them (see publisher);
// and every one waiting while the group is gone (RouterConfig.Gone),
// which it forgets (forgetLocked). It reports whether the group is gone.
func (p *publisher) expire() (gone bool) {
	now := time.Now()
	var goneErr error
	if p.r.cfg.Gone != nil {
		goneErr = p.r.cfg.Gone()
	}
	var calls []func(error)
	p.mu.Lock()
	for _, u := range p.q { // deadlines grow along the queue
		if goneErr == nil && now.Before(u.deadline) {
			break
		}
		if u.done != nil {
			calls = append(calls, u.done)
			u.done = nil
		}
	}
	if goneErr != nil && len(p.q) > 0 {
		p.forgetLocked()
	}
	// Each kind of warning goes at most once per warnPaceEvery.
	var heldBack int
	var log bool
	switch {
	case len(calls) > 0 && goneErr != nil:
		heldBack, log = p.goneWarn.add(now, len(calls))
	case len(calls) > 0:
		heldBack, log = p.lateWarn.add(now, len(calls))
	}
	p.mu.Unlock()
	switch {
	case !log:
	case goneErr != nil:
		p.r.log.Warn("forward: publishes nacked, the queue's node is gone", "count", len(calls), "held_back", heldBack, "err", goneErr)
	default:
		p.r.log.Warn("forward: publishes not confirmed in time", "count", len(calls), "held_back", heldBack, "timeout", p.r.cfg.PublishTimeout)
	}
	err := error(ErrPublishTimeout)
	if goneErr != nil {
		err = goneErr
	}
	for _, done := range calls {
		done(err)
	}
	return goneErr != nil
}

// forgetLocked drops every publish, all nacked since the group is gone,
// and numbers the next ones afresh under a new publisher ID. Kept, as
// expired ones are, they would never be answered while the node is gone,
// and a publisher that sends each nacked publish again (an RPC server
// requeueing a request whose reply was nacked, to answer it again) would
// fill maxUnconfirmed within seconds: Enqueue would then block its
// connection's reader until the node came back, deaf even to its close.
// None is sent again, so none is stored twice; one in flight may still
// be stored, which a nack allows.
func (p *publisher) forgetLocked() {
	for i := range p.q {
		p.q[i] = nil
	}
	p.q, p.bytes = nil, 0
	p.id, p.next = randomID(), 1
	p.resetLocked()
	p.freedLocked()
}

// close fails every unanswered publish with err.
func (p *publisher) close(err error) {
	p.mu.Lock()
	p.closed = true
	var calls []func(error)
	for _, u := range p.q {
		if u.done != nil {
			calls = append(calls, u.done)
		}
	}
	p.q, p.bytes, p.sent = nil, 0, 0 // nobody will answer them now
	p.resetLocked()
	close(p.space)
	p.space = make(chan struct{})
	p.mu.Unlock()
	for _, done := range calls {
		done(err)
	}
}

// run sends what is waiting to be sent, resolving the leader as needed,
// and fails publishes that wait too long.
func (p *publisher) run() {
	defer p.r.wg.Done()
	// The expiry ticker runs only while publishes wait for answers: an
	// idle queue's router wakes for nothing.
	every := min(p.r.cfg.PublishTimeout/4, 250*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	ticking := true
	backoff := minBackoff
	for {
		select {
		case <-p.wake:
		case <-tick.C:
		case <-p.r.ctx.Done():
			return
		}
		p.mu.Lock()
		waiting := len(p.q) > 0
		p.mu.Unlock()
		switch {
		case waiting && !ticking:
			tick.Reset(every)
			ticking = true
		case !waiting && ticking:
			tick.Stop()
			ticking = false
		}
		if p.expire() {
			// Nothing to reach: the ticker looks again while publishes
			// wait (a dial to a failed node could hang for opTimeout).
			continue
		}
		for {
			more, err := p.pump()
			if err != nil {
				p.r.log.Debug("forward: publishing to the leader failed, retrying", "err", err, "backoff", backoff)
				if p.r.sleep(p.r.ctx, backoff) != nil {
					return
				}
				backoff = min(2*backoff, maxBackoff)
				if p.expire() {
					break
				}
				continue
			}
			if !more {
				break
			}
			backoff = minBackoff
		}
	}
}

// pump sends one batch; more reports whether another may be waiting.
func (p *publisher) pump() (more bool, err error) {
	p.mu.Lock()
	if p.closed || p.sent == len(p.q) {
		p.mu.Unlock()
		return false, nil
	}
	path := p.path
	p.mu.Unlock()
	switch path {
	case pathNone:
		return true, p.connect()
	case pathLocal:
		p.sendLocal()
		return true, nil
	}
	return p.sendRemote()
}

// connect finds the leader and opens the path to it. It tries once: run
// retries with backoff, and expires publishes meanwhile.
func (p *publisher) connect() error {
	if n := p.refused.Load(); n > 0 {
		if err := p.r.sleep(p.r.ctx, min(minBackoff<<min(n-1, 10), maxBackoff)); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(p.r.ctx, opTimeout)
	defer cancel()
	t, err := p.r.leaders.tryResolve(ctx)
	if err != nil {
		return err
	}
	if t.local {
		p.mu.Lock()
		p.path = pathLocal
		p.gen++
		p.mu.Unlock()
		return nil
	}
	c, err := p.r.leaders.client(t.addr)
	if err != nil {
		return err
	}
	sctx, scancel := context.WithCancel(p.r.ctx)
	stream, err := c.Publish(sctx)
	if err != nil {
		scancel()
		p.r.leaders.forget(fromStatus(err))
		return err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		scancel()
		return nil
	}
	p.gen++
	s := &pubStream{gen: p.gen, id: p.id, stream: stream, cancel: scancel}
	p.path, p.stream = pathRemote, s
	p.mu.Unlock()
	p.r.wg.Add(1)
	go p.receive(s)
	return nil
}

// sendLocal hands what waits to the local member, in seq order.
func (p *publisher) sendLocal() {
	p.seqMu.Lock()
	defer p.seqMu.Unlock()
	p.mu.Lock()
	if p.path != pathLocal {
		p.mu.Unlock()
		return
	}
	type item struct {
		seq uint64
		m   *queue.Message
	}
	items := make([]item, 0, len(p.q)-p.sent)
	for _, u := range p.q[p.sent:] {
		items = append(items, item{u.seq, u.m})
	}
	p.sent = len(p.q)
	id, gen := p.id, p.gen
	p.mu.Unlock()
	for _, it := range items {
		if err := p.r.leaders.local().EnqueueAs(p.r.ctx, it.m, id, it.seq, p.localDone(id, gen, it.seq)); err != nil {
			return // localDone reset the path
		}
	}
}

// sendRemote sends one batch on the stream.
func (p *publisher) sendRemote() (bool, error) {
	p.mu.Lock()
	s := p.stream
	if p.path != pathRemote || s == nil {
		p.mu.Unlock()
		return true, nil
	}
	req := &queuepb.PublishRequest{QueueId: p.r.cfg.QueueID, Publisher: s.id}
	size := 0
	type item struct {
		seq uint64
		m   *queue.Message
	}
	items := make([]item, 0, min(publishBatch, len(p.q)-p.sent))
	for p.sent < len(p.q) && len(items) < publishBatch && size < publishBatchBytes {
		u := p.q[p.sent]
		items = append(items, item{u.seq, u.m})
		size += len(u.m.Body)
		p.sent++
	}
	more := p.sent < len(p.q)
	p.mu.Unlock()
	req.Publishes = make([]*queuepb.Publish, 0, len(items))
	var bad []uint64
	for _, it := range items {
		pm, err := encodeMessage(it.m)
		if err != nil {
			bad = append(bad, it.seq)
			continue
		}
		req.Publishes = append(req.Publishes, &queuepb.Publish{Seq: it.seq, Message: pm})
	}
	if len(bad) > 0 {
		// Cannot be encoded, so never stored: nack them. The gap they
		// leave needs a fresh numbering for what follows.
		p.answer(s.id, func(yield func(uint64, error)) {
			for _, seq := range bad {
				yield(seq, queue.ErrRejected)
			}
		})
		p.restart(s.id)
		return true, nil
	}
	if err := s.stream.Send(req); err != nil {
		p.streamEnded(s, err)
		return true, nil // the receiver sees the stream's status
	}
	return more, nil
}

// receive takes the leader's answers on one stream.
func (p *publisher) receive(s *pubStream) {
	defer p.r.wg.Done()
	for {
		rep, err := s.stream.Recv()
		if err != nil {
			p.streamEnded(s, err)
			return
		}
		p.refused.Store(0)
		p.answer(s.id, func(yield func(uint64, error)) {
			for _, seq := range rep.Confirmed {
				yield(seq, nil)
			}
			for _, seq := range rep.Rejected {
				yield(seq, queue.ErrRejected)
			}
			for _, seq := range rep.Deleted {
				yield(seq, queue.ErrDeleted)
			}
		})
		if len(rep.OutOfSequence) > 0 {
			p.restart(s.id)
		}
	}
}

// streamEnded sends everything unanswered again once the leader is found.
func (p *publisher) streamEnded(s *pubStream, err error) {
	f := fromStatus(err)
	p.mu.Lock()
	current := p.stream == s
	if current {
		p.resetLocked()
	}
	p.mu.Unlock()
	s.cancel()
	if current {
		p.refused.Add(1)
		p.r.leaders.forget(f)
		p.r.log.Debug("forward: publish stream ended", "err", err)
		p.signal()
	}
}
