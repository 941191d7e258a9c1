package transport

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/proto/raftpb"
)

// server is the Raft gRPC service of a Mux: it finds the named group and
// hands the request to its Transport.
type server struct {
	raftpb.UnimplementedRaftServer
	mux *Mux
}

// group finds the named group's transport, waiting up to groupWait for
// it to be registered: a queue's members open their groups as each node
// applies the queue's record, so the first requests of a new group (its
// first election, a new member's first entries) often arrive moments
// before the group exists here. Failing them at once would leave the
// sender backing off for as long as its timeouts, seconds.
//
// Before anything else it checks the request's claim: with TLS on, the
// server ID in the request's header must be the calling node's own name,
// from its certificate, so that no node can speak for another in any
// group (cluster/rpc's security.go).
func (s *server) group(ctx context.Context, name string, header *raftpb.RPCHeader) (*Transport, error) {
	if err := rpc.RequireNode(ctx, string(header.GetId())); err != nil {
		return nil, err
	}
	if s.mux.lookup(name) == nil {
		s.mux.onMissing(name)
	}
	if t := s.mux.awaitGroup(ctx, name, time.Duration(s.mux.groupWait.Load())); t != nil {
		return t, nil
	}
	return nil, status.Errorf(codes.NotFound, "raft group %q not found on %s", name, s.mux.local)
}

func (s *server) AppendEntries(ctx context.Context, req *raftpb.AppendEntriesRequest) (*raftpb.AppendEntriesResponse, error) {
	t, err := s.group(ctx, req.Group, req.Header)
	if err != nil {
		return nil, err
	}
	a := appendReqFromPB(req)
	resp, rpcErr, err := t.in.serve(ctx, a, isHeartbeat(a))
	if err != nil {
		return nil, err
	}
	r, _ := resp.(*raft.AppendEntriesResponse)
	return appendRespToPB(r, rpcErr), nil
}

// AppendEntriesPipeline serves one replication pipeline: requests are
// handed to raft one after the other, in order, and answered in order
// (raft handles a group's log traffic serially anyway; the pipelining is
// in the next request travelling while this one is processed).
func (s *server) AppendEntriesPipeline(stream raftpb.Raft_AppendEntriesPipelineServer) error {
	s.mux.pipelinesServing.Add(1)
	defer s.mux.pipelinesServing.Add(-1)
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		t, err := s.group(ctx, req.Group, req.Header)
		if err != nil {
			return err
		}
		a := appendReqFromPB(req)
		resp, rpcErr, err := t.in.serve(ctx, a, isHeartbeat(a))
		if err != nil {
			return err
		}
		r, _ := resp.(*raft.AppendEntriesResponse)
		if err := stream.Send(appendRespToPB(r, rpcErr)); err != nil {
			return err
		}
	}
}

func (s *server) RequestVote(ctx context.Context, req *raftpb.RequestVoteRequest) (*raftpb.RequestVoteResponse, error) {
	t, err := s.group(ctx, req.Group, req.Header)
	if err != nil {
		return nil, err
	}
	vote := voteReqFromPB(req)
	vote.ID = nil // judged on terms and logs (votes.go)
	resp, rpcErr, err := t.in.serve(ctx, vote, false)
	if err != nil {
		return nil, err
	}
	r, _ := resp.(*raft.RequestVoteResponse)
	return voteRespToPB(r, rpcErr), nil
}

func (s *server) RequestPreVote(ctx context.Context, req *raftpb.RequestPreVoteRequest) (*raftpb.RequestPreVoteResponse, error) {
	t, err := s.group(ctx, req.Group, req.Header)
	if err != nil {
		return nil, err
	}
	pre := preVoteReqFromPB(req)
	if resp, ok := t.answerPreVote(pre); ok {
		return preVoteRespToPB(resp, nil), nil
	}
	resp, rpcErr, err := t.in.serve(ctx, pre, false)
	if err != nil {
		return nil, err
	}
	r, _ := resp.(*raft.RequestPreVoteResponse)
	return preVoteRespToPB(r, rpcErr), nil
}

func (s *server) TimeoutNow(ctx context.Context, req *raftpb.TimeoutNowRequest) (*raftpb.TimeoutNowResponse, error) {
	t, err := s.group(ctx, req.Group, req.Header)
	if err != nil {
		return nil, err
	}
	resp, rpcErr, err := t.in.serve(ctx, &raft.TimeoutNowRequest{RPCHeader: headerFromPB(req.Header)}, false)
	if err != nil {
		return nil, err
	}
	r, _ := resp.(*raft.TimeoutNowResponse)
	return timeoutNowRespToPB(r, rpcErr), nil
}

// errSnapshotAbandoned ends the snapshot reader once raft has answered
// (or the wait was given up), so that the feeding loop stops even if raft
// answered without reading the snapshot to its end.
var errSnapshotAbandoned = errors.New("transport: snapshot stream abandoned")

// InstallSnapshot hands raft the request with an io.Reader fed by the
// stream's chunks as they arrive (an io.Pipe: nothing is buffered beyond
// the chunk in hand), and answers once raft has answered.
func (s *server) InstallSnapshot(stream raftpb.Raft_InstallSnapshotServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.Request == nil {
		return status.Error(codes.InvalidArgument, "first snapshot chunk carries no request")
	}
	t, err := s.group(stream.Context(), first.Request.Group, first.Request.Header)
	if err != nil {
		return err
	}
	ctx := stream.Context()
	pr, pw := io.Pipe()
	respCh, err := t.in.dispatch(ctx, snapshotReqFromPB(first.Request), pr, false)
	if err != nil {
		return err
	}
	var (
		resp           any
		rpcErr, waitEr error
		answered       = make(chan struct{})
	)
	go func() {
		defer close(answered)
		resp, rpcErr, waitEr = t.in.wait(ctx, respCh)
		pr.CloseWithError(errSnapshotAbandoned)
	}()
	// Only this goroutine touches the stream until it returns.
	pw.CloseWithError(feed(stream, pw, first.Data))
	<-answered
	if waitEr != nil {
		return waitEr
	}
	r, _ := resp.(*raft.InstallSnapshotResponse)
	return stream.SendAndClose(snapshotRespToPB(r, rpcErr))
}

// feed copies the snapshot chunks into w; nil at the end of the stream
// (CloseWithError(nil) is Close: the reader sees io.EOF).
func feed(stream raftpb.Raft_InstallSnapshotServer, w io.Writer, data []byte) error {
	for {
		if len(data) > 0 {
			if _, err := w.Write(data); err != nil {
				return err
			}
		}
		chunk, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		data = chunk.Data
	}
}
