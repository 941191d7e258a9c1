package transport

import (
	"context"
	"io"
	"sync"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// inbox is a group's side of the requests its peers send it (and those it
// sends itself, Campaign and RaiseTerm): it hands each to raft, on
// Consumer or to raft's heartbeat fast path, and waits for raft's answer.
// It owns what only that hand-over touches, so that the Transport's
// outgoing side need not know how raft is reached.
type inbox struct {
	group string
	local string          // this node's internal address, for errors
	life  context.Context // the Transport's: done once it is closed
	ch    chan raft.RPC   // what Transport.Consumer returns

	hbMu sync.Mutex
	hbFn func(raft.RPC)
	// hbRun is held (read) while raft's fast path handles a heartbeat on
	// a serving goroutine, and taken by close, which sets hbClosed: raft's
	// Shutdown waits for its own goroutines, not for those, and its
	// caller then closes the group's stores, under a heartbeat that was
	// still writing the term (raft panics when it cannot).
	hbRun    sync.RWMutex
	hbClosed bool
}

func (in *inbox) init(group, local string, life context.Context) {
	in.group, in.local, in.life = group, local, life
	in.ch = make(chan raft.RPC)
}

// setHeartbeatHandler makes heartbeats go to cb on the serving goroutine.
func (in *inbox) setHeartbeatHandler(cb func(rpc raft.RPC)) {
	in.hbMu.Lock()
	defer in.hbMu.Unlock()
	in.hbFn = cb
}

func (in *inbox) heartbeatHandler() func(raft.RPC) {
	in.hbMu.Lock()
	defer in.hbMu.Unlock()
	return in.hbFn
}

// close waits for a heartbeat raft's fast path is handling, and refuses
// the later ones.
func (in *inbox) close() {
	in.hbRun.Lock()
	in.hbClosed = true
	in.hbRun.Unlock()
}

// serve hands one incoming request to raft and waits for its answer. It
// returns raft's response and raft's own error, or a gRPC status error
// when the group closes or the caller gives up first.
func (in *inbox) serve(ctx context.Context, cmd any, heartbeat bool) (any, error, error) {
	respCh, err := in.dispatch(ctx, cmd, nil, heartbeat)
	if err != nil {
		return nil, nil, err
	}
	return in.wait(ctx, respCh)
}

// dispatch hands a request to raft: to the heartbeat fast path when it is
// a heartbeat and raft set a handler, to Consumer otherwise.
func (in *inbox) dispatch(ctx context.Context, cmd any, body io.Reader, heartbeat bool) (<-chan raft.RPCResponse, error) {
	respCh := make(chan raft.RPCResponse, 1)
	r := raft.RPC{Command: cmd, Reader: body, RespChan: respCh}
	if heartbeat {
		if fn := in.heartbeatHandler(); fn != nil {
			fn(r)
			return respCh, nil
		}
	}
	select {
	case in.ch <- r:
		return respCh, nil
	case <-in.life.Done():
		return nil, in.closedErr()
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// wait waits for raft's answer to a dispatched request.
func (in *inbox) wait(ctx context.Context, respCh <-chan raft.RPCResponse) (any, error, error) {
	select {
	case resp := <-respCh:
		return resp.Response, resp.Error, nil
	case <-in.life.Done():
		return nil, nil, in.closedErr()
	case <-ctx.Done():
		return nil, nil, status.FromContextError(ctx.Err()).Err()
	}
}

func (in *inbox) closedErr() error {
	return status.Errorf(codes.Unavailable, "raft group %q on %s: %v", in.group, in.local, raft.ErrTransportShutdown)
}

// dispatchHeartbeat hands a heartbeat to raft's fast path, which answers
// on this goroutine; without one (not set yet) it goes to Consumer from a
// goroutine of its own, so that the batch is not held up.
func (in *inbox) dispatchHeartbeat(ctx context.Context, a *raft.AppendEntriesRequest) <-chan raft.RPCResponse {
	fn := in.heartbeatHandler()
	respCh := make(chan raft.RPCResponse, 1)
	if fn != nil {
		in.hbRun.RLock()
		defer in.hbRun.RUnlock()
		if in.hbClosed {
			respCh <- raft.RPCResponse{Error: in.closedErr()}
			return respCh
		}
		fn(raft.RPC{Command: a, RespChan: respCh})
		return respCh
	}
	go func() {
		ch, err := in.dispatch(ctx, a, nil, false)
		if err != nil {
			respCh <- raft.RPCResponse{Error: err}
			return
		}
		resp, rpcErr, err := in.wait(ctx, ch)
		if err != nil {
			rpcErr = err
		}
		respCh <- raft.RPCResponse{Response: resp, Error: rpcErr}
	}()
	return respCh
}

// toSelf hands req to this node's own member of the group, as if a peer
// had sent it, and returns its error.
func (in *inbox) toSelf(ctx context.Context, req any) error {
	respCh, err := in.dispatch(ctx, req, nil, false)
	if err != nil {
		return err
	}
	_, rpcErr, err := in.wait(ctx, respCh)
	if err != nil {
		return err
	}
	return rpcErr
}
