package transport

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/proto/raftpb"
)

// pipelineIdleGrace is how long a pipeline that has gone idle waits for
// raft to send more before telling the group (SetPipelineIdle).
const pipelineIdleGrace = 50 * time.Millisecond

// pipelineDepth is how many AppendEntries may be in flight on one
// pipeline, NetworkTransport's default (raft.DefaultMaxRPCsInFlight): a
// deeper pipeline combines badly with raft's batching (hashicorp/raft#541).
const pipelineDepth = raft.DefaultMaxRPCsInFlight

// streamIdle is how long a pipeline's stream stays open with nothing in
// flight. raft keeps a pipeline to each follower for as long as the
// follower answers, that is for the life of the leadership; an open
// stream costs three goroutines (the receiver here, gRPC's watcher of
// the stream's context, the serving handler on the follower) and gRPC's
// buffers, which for a node leading hundreds of idle queues was a quarter
// of its goroutines and a fifth of its memory. A stream that idles this
// long ends, and the next AppendEntries opens another: opening one costs
// no round trip (the headers go with the first request).
const streamIdle = 2 * time.Second

// AppendEntriesPipeline implements raft.Transport: AppendEntries for this
// group to target go on a bidirectional stream of the ordinary
// connection, opened when there is something to send and closed when
// idle (streamIdle). Responses come back in request order on the
// pipeline's Consumer.
func (t *Transport) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if t.ctx.Err() != nil {
		return nil, t.fail("AppendEntriesPipeline", target, raft.ErrTransportShutdown)
	}
	cc, err := t.mux.pool.Conn(string(target))
	if err != nil {
		return nil, t.failReplication("AppendEntriesPipeline", target, err)
	}
	ctx, cancel := context.WithCancel(t.ctx)
	p := &pipeline{
		t:            t,
		target:       target,
		client:       raftpb.NewRaftClient(cc),
		ctx:          ctx,
		cancel:       cancel,
		idleAfter:    streamIdle,
		consumerWait: consumerWait,
		// As in NetworkTransport, the receiver holds one future and the
		// sender one more before blocking: depth-2 buffered.
		inflight: make(chan *appendFuture, pipelineDepth-2),
		doneCh:   make(chan raft.AppendFuture, pipelineDepth-2),
	}
	p.waitingSince.Store(time.Now().UnixNano())
	t.spares.pipes.Store(target, p) // for the choice of spare followers (spare.go)
	return p, nil
}

// pipeline is one follower's replication pipeline. AppendEntries is
// called by raft's replication goroutine only; the receiver of the open
// stream owns its receiving side.
type pipeline struct {
	t      *Transport
	target raft.ServerAddress
	client raftpb.RaftClient
	ctx    context.Context
	cancel context.CancelFunc
	// idleAfter is streamIdle and consumerWait is the const; tests
	// shorten them.
	idleAfter    time.Duration
	consumerWait time.Duration

	// mu guards stream, the open stream or nil while idle. AppendEntries
	// holds it from sending a request until the receiver has taken its
	// future, and the receiver ends an idle stream only if it gets mu at
	// once (TryLock: waiting for it there would deadlock with an
	// AppendEntries waiting for the receiver), so a stream a request has
	// just gone out on is never ended.
	mu     sync.Mutex
	stream raftpb.Raft_AppendEntriesPipelineClient

	inflight chan *appendFuture
	doneCh   chan raft.AppendFuture
	once     sync.Once
	sent     atomic.Uint64 // requests sent, for the idle check

	// checkIdle's timer (created on first use), and the requests sent
	// and the follower's last acknowledged index when it was last set.
	idleCheck         *time.Timer
	idleSeq, idleLast atomic.Uint64

	// lastSend is when the last request went out (AppendEntries only).
	// pending counts requests sent and not yet answered, and waitingSince
	// is the Unix nanoseconds of the last answer or, if later, of the
	// request sent when nothing was pending: how long the follower has
	// kept the leader waiting (spare.go's answering).
	lastSend     time.Time
	pending      atomic.Int32
	waitingSince atomic.Int64
}

// AppendEntries implements raft.AppendPipeline. It blocks while
// pipelineDepth requests are in flight.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	now := time.Now()
	if wait := p.t.spares.wait(p, args, now); wait > 0 {
		// A spare follower (spare.go): raft gathers the entries appended
		// meanwhile for the next request, which the follower stores with
		// one sync.
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-p.t.hurry:
			timer.Stop()
		case <-p.ctx.Done():
			timer.Stop()
			return nil, raft.ErrPipelineShutdown
		}
		now = time.Now()
	}
	p.lastSend = now
	f := &appendFuture{start: now, args: args, resp: resp, done: make(chan struct{})}
	p.sent.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stream == nil {
		if err := p.open(); err != nil {
			return nil, p.t.failReplication("AppendEntriesPipeline", p.target, err)
		}
	}
	if p.pending.Add(1) == 1 {
		p.waitingSince.Store(now.UnixNano())
	}
	if err := p.stream.Send(appendReqToPB(p.t.group, args)); err != nil {
		p.pending.Add(-1)
		// io.EOF means the stream ended; the reason comes with the
		// receiving side, and raft closes the pipeline either way.
		return nil, p.t.failReplication("AppendEntriesPipeline", p.target, err)
	}
	select {
	case p.inflight <- f:
		return f, nil
	case <-p.ctx.Done():
		p.pending.Add(-1)
		return nil, raft.ErrPipelineShutdown
	}
}

// open starts a stream and its receiver; mu held.
func (p *pipeline) open() error {
	ctx, cancel := context.WithCancel(p.ctx)
	stream, err := p.client.AppendEntriesPipeline(ctx)
	if err != nil {
		cancel()
		return err
	}
	p.stream = stream
	go p.receive(stream, cancel)
	return nil
}

// Consumer implements raft.AppendPipeline.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.doneCh }

// Close implements raft.AppendPipeline: it ends the stream and with it
// the calls in flight.
func (p *pipeline) Close() error {
	p.once.Do(p.cancel)
	p.t.spares.pipes.CompareAndDelete(p.target, p)
	return nil
}

// receive completes the futures of stream in order, and ends the stream
// once nothing has been in flight for streamIdle. A response that does
// not come within rpcTimeout ends the pipeline (NetworkTransport's read
// deadline); after a failure every remaining future fails the same way
// and the failed stream stays, so that raft learns of the failure from
// every later call and closes the pipeline.
func (p *pipeline) receive(stream raftpb.Raft_AppendEntriesPipelineClient, cancel context.CancelFunc) {
	defer cancel()
	var failed error
	timer := time.AfterFunc(rpcTimeout, p.cancel)
	timer.Stop()
	defer timer.Stop()
	idle := time.NewTimer(p.idleAfter)
	defer idle.Stop()
	for {
		select {
		case f := <-p.inflight:
			if failed == nil {
				timer.Reset(rpcTimeout)
				out, err := stream.Recv()
				timer.Stop()
				if err != nil {
					failed = p.t.failReplication("AppendEntriesPipeline", p.target, err)
				} else {
					f.err = appendRespFromPB(out, f.resp)
					if f.err == nil {
						p.t.acks.record(p.target, f.args, f.resp)
					}
					p.checkIdle(f)
				}
			}
			if failed != nil {
				f.err = failed
			}
			p.answered()
			close(f.done)
			if !p.hand(f) {
				return
			}
			idle.Reset(p.idleAfter)
		case <-idle.C:
			if failed != nil {
				continue
			}
			if !p.mu.TryLock() { // a request is going out
				idle.Reset(p.idleAfter)
				continue
			}
			if len(p.inflight) > 0 {
				// Futures queued behind the timer (inflight holds none
				// at pipelineDepth 2, but a deeper pipeline's would
				// answer on this stream).
				p.mu.Unlock()
				idle.Reset(p.idleAfter)
				continue
			}
			p.stream = nil
			p.mu.Unlock()
			// The follower's handler sees the end of its requests and
			// returns; the deferred cancel releases gRPC's side.
			_ = stream.CloseSend()
			return
		case <-p.ctx.Done():
			return
		}
	}
}

// answered notes the answer (or failure) of the oldest request in flight;
// the time it notes is when the next one started waiting at the latest.
func (p *pipeline) answered() {
	p.waitingSince.Store(time.Now().UnixNano())
	p.pending.Add(-1)
}

// consumerWait is how long a future waits for raft's decoder to take it
// before the pipeline ends (hand).
const consumerWait = 5 * time.Second

// hand passes f to raft's decoder on Consumer. The decoder stops reading
// when a response fails or names a newer term, and raft closes the
// pipeline only once its sender notices; a sender that sends again
// meanwhile waits on the receiver, which waits on the decoder, for ever,
// and raft.Shutdown with it (seen as a node test hanging in Close). A
// future the decoder does not take within consumerWait ends the pipeline:
// the sender's call fails and raft goes back to sending one request at a
// time.
func (p *pipeline) hand(f *appendFuture) bool {
	select {
	case p.doneCh <- f: // the decoder is usually waiting
		return true
	default:
	}
	t := time.NewTimer(p.consumerWait)
	defer t.Stop()
	select {
	case p.doneCh <- f:
		return true
	case <-t.C:
		p.cancel()
		return false
	case <-p.ctx.Done():
		return false
	}
}

// checkIdle tells the group, through SetPipelineIdle's function, how far
// the follower has acknowledged when this answer leaves nothing in flight
// and raft sends nothing more within pipelineIdleGrace. raft's pipeline
// sends one batch (MaxAppendEntries) each time it is woken, by a new entry
// or by CommitTimeout; a follower more than a batch behind when the
// pipeline starts (one back from a long outage) would otherwise catch up
// a batch per CommitTimeout on an idle queue, which is seconds to a
// minute. Under traffic each answer pushes the one timer back, and it
// fires only once raft has gone quiet. Receivers call it one at a time.
func (p *pipeline) checkIdle(f *appendFuture) {
	n := len(f.args.Entries)
	if n == 0 || f.err != nil || !f.resp.Success || len(p.inflight) > 0 {
		return
	}
	if p.t.behind.nudge.Load() == nil {
		return
	}
	p.idleSeq.Store(p.sent.Load())
	p.idleLast.Store(f.args.Entries[n-1].Index)
	if p.idleCheck == nil {
		p.idleCheck = time.AfterFunc(pipelineIdleGrace, p.idleNow)
	} else {
		p.idleCheck.Reset(pipelineIdleGrace)
	}
}

// idleNow is checkIdle's timer: nothing was sent since the answer.
func (p *pipeline) idleNow() {
	if fn := p.t.behind.nudge.Load(); fn != nil && p.sent.Load() == p.idleSeq.Load() && p.ctx.Err() == nil {
		(*fn)(p.idleLast.Load())
	}
}
