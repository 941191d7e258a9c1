package transport

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/proto/raftpb"
)

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
}

// AppendEntries implements raft.AppendPipeline. It blocks while
// pipelineDepth requests are in flight.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &appendFuture{start: time.Now(), args: args, resp: resp, done: make(chan struct{})}
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
