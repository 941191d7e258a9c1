package transport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/proto/raftpb"
)

// Heartbeats travel in batches: every group's leader heartbeats every
// follower on its own timer, so a node leading a thousand groups would
// make thousands of calls a second to each peer while idle. Instead each
// peer node has one sender (peerHeartbeats) with at most one Heartbeats
// call in flight: a heartbeat that finds it idle waits its group's
// linger (Transport.SetHeartbeatLinger) for others to join it, and those
// that arrive while a call is in flight go out together in the next one.
// raft spreads its groups' heartbeats randomly over the interval, so
// without the linger almost every call carried one; a linger that is a
// small part of the heartbeat interval costs nothing against timeouts of
// seconds, and each call costs every node a handful of thread wake-ups.
//
// Each heartbeat's answer is its own group's: the serving node hands
// every request of a batch to its group's heartbeat handler (raft's fast
// path) and returns each group's response, or the status the unary
// AppendEntries call would have failed with.

const (
	// maxHeartbeatBatch bounds the heartbeats of one call (about 100
	// bytes each).
	maxHeartbeatBatch = 1024
	// heartbeatStraggle is how long a served batch waits for heartbeats
	// that raft did not answer on the spot (raft's fast path answers on
	// the serving goroutine; a group shutting down never answers). Those
	// are answered Unavailable, so that one group cannot hold up the
	// heartbeats of the others.
	heartbeatStraggle = 50 * time.Millisecond
	// defaultHeartbeatLinger is a group's linger unless it sets one:
	// short enough for a heartbeat timeout of a second.
	defaultHeartbeatLinger = 50 * time.Millisecond
	// failingLinger is the most a heartbeat waits while the last call to
	// its peer failed. raft backs off from a follower it cannot reach
	// and learns that it answers again only from a heartbeat (then it
	// resumes replicating to it): a restarted node should not also wait
	// out a linger of seconds before its queues catch up.
	failingLinger = 50 * time.Millisecond
)

// hbCall is one group's heartbeat waiting for its batch's answer.
type hbCall struct {
	req  *raftpb.AppendEntriesRequest
	done chan hbResult // buffered: the sender never blocks on it
}

type hbResult struct {
	resp *raftpb.AppendEntriesResponse
	err  error
}

// peerHeartbeats sends the heartbeats of every group of the node that
// lingers as long to one peer node (groups with different lingers, such
// as the metadata group and the queues, do not hold up each other). mu
// guards queue and sending; the goroutine that set sending owns the call
// in flight.
type peerHeartbeats struct {
	mux    *Mux
	target string
	linger time.Duration

	mu      sync.Mutex
	queue   []*hbCall
	sending bool
	failing bool      // the last call failed (failingLinger)
	called  time.Time // when the last call returned
}

// heartbeats returns the heartbeat sender to target for groups that
// linger as long, creating it.
func (m *Mux) heartbeats(target string, linger time.Duration) *peerHeartbeats {
	key := hbKey{target, linger}
	m.hbMu.Lock()
	defer m.hbMu.Unlock()
	h := m.hb[key]
	if h == nil {
		h = &peerHeartbeats{mux: m, target: target, linger: linger}
		m.hb[key] = h
	}
	return h
}

// hbKey names a heartbeat sender: the peer and the linger.
type hbKey struct {
	target string
	linger time.Duration
}

// heartbeat sends one heartbeat of this group in the next batch to target
// and waits for the follower's answer.
func (t *Transport) heartbeat(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if t.ctx.Err() != nil {
		return t.fail("AppendEntries", target, raft.ErrTransportShutdown)
	}
	req := appendReqToPB(t.group, args)
	linger := time.Duration(t.hbLinger.Load())
	hurry := t.hurry
	for {
		select {
		case <-hurry:
			// StopLingering: it goes with the heartbeats that do not
			// wait (a batch of its own, answered NotFound at once by
			// a peer whose member is gone, as a unary AppendEntries,
			// which waits for the group to open, would not be).
			linger, hurry = 0, nil
		default:
		}
		c := &hbCall{req: req, done: make(chan hbResult, 1)}
		t.mux.heartbeats(string(target), linger).add(c)
		select {
		case r := <-c.done:
			if r.err != nil {
				return t.fail("AppendEntries", target, r.err)
			}
			t.behind.answered(target)
			if err := appendRespFromPB(r.resp, resp); err != nil {
				return err
			}
			t.acks.record(target, args, resp)
			return nil
		case <-hurry:
			// The lingering batch still carries it: a second heartbeat
			// of the same term is harmless, and its answer goes unread.
		case <-t.ctx.Done():
			return t.fail("AppendEntries", target, raft.ErrTransportShutdown)
		}
	}
}

// add queues c and starts a sender unless one is running.
func (h *peerHeartbeats) add(c *hbCall) {
	h.mu.Lock()
	h.queue = append(h.queue, c)
	start := !h.sending
	h.sending = true
	h.mu.Unlock()
	if start {
		go h.run()
	}
}

// run sends what is queued, one call at a time, and stops as soon as a
// call leaves nothing queued. A call goes a linger after the call before
// it or, if the heartbeat that started the sender came later than that,
// a linger after that heartbeat: the rhythm of the sender that slept the
// linger after every call and stopped only then, finding nothing queued
// (a timer wake-up per call, on an idle node most of the sender's own;
// docs/performance.md). A group's next heartbeat,
// raft's interval after the answer, so still goes at most a linger after
// the call that carried the last one.
func (h *peerHeartbeats) run() {
	for {
		h.mu.Lock()
		wait := h.linger
		if h.failing {
			wait = min(wait, failingLinger)
		}
		if until := time.Until(h.called.Add(wait)); until > 0 {
			wait = until
		}
		h.mu.Unlock()
		time.Sleep(wait)
		h.mu.Lock()
		batch := h.queue
		if len(batch) > maxHeartbeatBatch {
			h.queue = append([]*hbCall(nil), batch[maxHeartbeatBatch:]...)
			batch = batch[:maxHeartbeatBatch]
		} else {
			h.queue = nil
		}
		h.mu.Unlock()
		h.send(batch) // never empty: the sender runs only while something is queued
		h.mu.Lock()
		h.called = time.Now()
		if len(h.queue) == 0 {
			h.sending = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
}

// send makes one Heartbeats call and hands every caller its answer.
func (h *peerHeartbeats) send(batch []*hbCall) {
	reqs := make([]*raftpb.AppendEntriesRequest, len(batch))
	for i, c := range batch {
		reqs[i] = c.req
	}
	out, err := h.call(reqs)
	h.mu.Lock()
	h.failing = err != nil && status.Code(err) != codes.Unimplemented
	h.mu.Unlock()
	if status.Code(err) == codes.Unimplemented {
		// A peer from before batching: one call per heartbeat.
		h.sendEach(batch)
		return
	}
	if err == nil && len(out.Results) != len(batch) {
		err = fmt.Errorf("transport: %d heartbeat results for %d requests", len(out.Results), len(batch))
	}
	for i, c := range batch {
		if err != nil {
			c.done <- hbResult{err: err}
			continue
		}
		c.done <- resultFromPB(out.Results[i])
	}
}

func (h *peerHeartbeats) call(reqs []*raftpb.AppendEntriesRequest) (*raftpb.HeartbeatBatchResponse, error) {
	cc, err := h.mux.pool.Conn(h.target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	return raftpb.NewRaftClient(cc).Heartbeats(ctx, &raftpb.HeartbeatBatch{Requests: reqs})
}

func (h *peerHeartbeats) sendEach(batch []*hbCall) {
	cc, err := h.mux.pool.Conn(h.target)
	var wg sync.WaitGroup
	for _, c := range batch {
		if err != nil {
			c.done <- hbResult{err: err}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
			defer cancel()
			out, err := raftpb.NewRaftClient(cc).AppendEntries(ctx, c.req)
			c.done <- hbResult{resp: out, err: err}
		}()
	}
	wg.Wait()
}

func resultFromPB(r *raftpb.HeartbeatResult) hbResult {
	if r.Code != uint32(codes.OK) {
		return hbResult{err: status.Error(codes.Code(r.Code), r.Message)}
	}
	if r.Response == nil {
		return hbResult{err: status.Error(codes.Internal, "heartbeat result without a response")}
	}
	return hbResult{resp: r.Response}
}

// Heartbeats serves a batch: each request goes to its group's heartbeat
// handler on this goroutine, one after the other (raft answers a
// heartbeat at once, without its main loop); what is not answered by
// then gets heartbeatStraggle more, all together.
func (s *server) Heartbeats(ctx context.Context, in *raftpb.HeartbeatBatch) (*raftpb.HeartbeatBatchResponse, error) {
	s.mux.hbServed.Add(1)
	out := &raftpb.HeartbeatBatchResponse{Results: make([]*raftpb.HeartbeatResult, len(in.Requests))}
	waiting := make([]<-chan raft.RPCResponse, len(in.Requests))
	groups := make([]*Transport, len(in.Requests))
	for i, req := range in.Requests {
		if err := rpc.RequireNode(ctx, string(req.GetHeader().GetId())); err != nil {
			return nil, err // a node that speaks for another: the whole batch is refused
		}
		t := s.mux.lookup(req.Group)
		if t == nil {
			// Not onMissing: a heartbeat does not wake a hibernated
			// group (a leader that closes sends its last ones as it
			// stops); the leader's next entry does.
			out.Results[i] = statusResult(codes.NotFound, fmt.Sprintf("raft group %q not found on %s", req.Group, s.mux.local))
			continue
		}
		a := appendReqFromPB(req)
		if !isHeartbeat(a) {
			out.Results[i] = statusResult(codes.InvalidArgument, "not a heartbeat")
			continue
		}
		groups[i], waiting[i] = t, t.in.dispatchHeartbeat(ctx, a)
	}
	var straggle <-chan time.Time
	for i, ch := range waiting {
		if ch == nil {
			continue
		}
		select {
		case r := <-ch:
			out.Results[i] = rpcResult(r)
			continue
		default:
		}
		if straggle == nil {
			straggle = time.After(heartbeatStraggle)
		}
		select {
		case r := <-ch:
			out.Results[i] = rpcResult(r)
		case <-groups[i].ctx.Done():
			out.Results[i] = statusResult(codes.Unavailable, groups[i].in.closedErr().Error())
		case <-straggle:
			out.Results[i] = statusResult(codes.Unavailable, fmt.Sprintf("raft group %q on %s did not answer the heartbeat", groups[i].group, s.mux.local))
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return out, nil
}

func rpcResult(r raft.RPCResponse) *raftpb.HeartbeatResult {
	if st, ok := status.FromError(r.Error); ok && r.Response == nil && r.Error != nil {
		// The group closed or the wait was given up: a transport
		// failure, not raft's answer.
		return statusResult(st.Code(), st.Message())
	}
	resp, _ := r.Response.(*raft.AppendEntriesResponse)
	return &raftpb.HeartbeatResult{Response: appendRespToPB(resp, r.Error)}
}

func statusResult(code codes.Code, msg string) *raftpb.HeartbeatResult {
	return &raftpb.HeartbeatResult{Code: uint32(code), Message: msg}
}
