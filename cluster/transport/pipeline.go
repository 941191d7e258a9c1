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

// AppendEntriesPipeline implements raft.Transport: a bidirectional stream
// for this group to target on the ordinary connection. Responses come
// back in request order on the pipeline's Consumer.
func (t *Transport) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if t.ctx.Err() != nil {
		return nil, t.fail("AppendEntriesPipeline", target, raft.ErrTransportShutdown)
	}
	cc, err := t.mux.pool.Conn(string(target))
	if err != nil {
		return nil, t.fail("AppendEntriesPipeline", target, err)
	}
	ctx, cancel := context.WithCancel(t.ctx)
	stream, err := raftpb.NewRaftClient(cc).AppendEntriesPipeline(ctx)
	if err != nil {
		cancel()
		return nil, t.fail("AppendEntriesPipeline", target, err)
	}
	p := &pipeline{
		t:      t,
		target: target,
		stream: stream,
		ctx:    ctx,
		cancel: cancel,
		// As in NetworkTransport, the receiver holds one future and the
		// sender one more before blocking: depth-2 buffered.
		inflight: make(chan *appendFuture, pipelineDepth-2),
		doneCh:   make(chan raft.AppendFuture, pipelineDepth-2),
	}
	go p.receive()
	return p, nil
}

// pipeline is one AppendEntries stream. AppendEntries is called by raft's
// replication goroutine only; receive owns the receiving side.
type pipeline struct {
	t      *Transport
	target raft.ServerAddress
	stream raftpb.Raft_AppendEntriesPipelineClient
	ctx    context.Context
	cancel context.CancelFunc

	inflight chan *appendFuture
	doneCh   chan raft.AppendFuture
	once     sync.Once
	sent     atomic.Uint64 // requests sent, for the idle check
}

// AppendEntries implements raft.AppendPipeline. It blocks while
// pipelineDepth requests are in flight.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &appendFuture{start: time.Now(), args: args, resp: resp, done: make(chan struct{})}
	p.sent.Add(1)
	if err := p.stream.Send(appendReqToPB(p.t.group, args)); err != nil {
		// io.EOF means the stream ended; the reason comes with the
		// receiving side, and raft closes the pipeline either way.
		return nil, p.t.fail("AppendEntriesPipeline", p.target, err)
	}
	select {
	case p.inflight <- f:
		return f, nil
	case <-p.ctx.Done():
		return nil, raft.ErrPipelineShutdown
	}
}

// Consumer implements raft.AppendPipeline.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.doneCh }

// Close implements raft.AppendPipeline: it ends the stream and with it
// the calls in flight.
func (p *pipeline) Close() error {
	p.once.Do(p.cancel)
	return nil
}

// receive completes the futures in order. A response that does not come
// within rpcTimeout ends the stream (NetworkTransport's read deadline);
// after a failure every remaining future fails the same way.
func (p *pipeline) receive() {
	var failed error
	timer := time.AfterFunc(rpcTimeout, p.cancel)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case f := <-p.inflight:
			if failed == nil {
				timer.Reset(rpcTimeout)
				out, err := p.stream.Recv()
				timer.Stop()
				if err != nil {
					failed = p.t.fail("AppendEntriesPipeline", p.target, err)
				} else {
					f.err = appendRespFromPB(out, f.resp)
					p.checkIdle(f)
				}
			}
			if failed != nil {
				f.err = failed
			}
			close(f.done)
			select {
			case p.doneCh <- f:
			case <-p.ctx.Done():
				return
			}
		case <-p.ctx.Done():
			return
		}
	}
}

// checkIdle tells the group, through SetPipelineIdle's function, how far
// the follower has acknowledged when this answer leaves nothing in flight
// and raft sends nothing more within pipelineIdleGrace. raft's pipeline
// sends one batch (MaxAppendEntries) each time it is woken, by a new entry
// or by CommitTimeout; a follower more than a batch behind when the
// pipeline starts (one back from a long outage) would otherwise catch up
// a batch per CommitTimeout on an idle queue, which is seconds to a
// minute. Under traffic raft keeps sending and the check finds it busy.
func (p *pipeline) checkIdle(f *appendFuture) {
	n := len(f.args.Entries)
	if n == 0 || f.err != nil || !f.resp.Success || len(p.inflight) > 0 {
		return
	}
	fn := p.t.pipelineIdle.Load()
	if fn == nil {
		return
	}
	seq, last := p.sent.Load(), f.args.Entries[n-1].Index
	time.AfterFunc(pipelineIdleGrace, func() {
		if p.sent.Load() == seq && p.ctx.Err() == nil {
			(*fn)(last)
		}
	})
}
