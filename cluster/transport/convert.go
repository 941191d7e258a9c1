package transport

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/proto/raftpb"
)

// Conversions between raft's RPC structs and their protobuf mirrors. The
// AppendEntries ones carry every message body of every queue, so they
// allocate the entries as one slab each way and never copy Data: on the
// sending side the proto entries alias raft's buffers (gRPC marshals
// before the call returns), on the receiving side raft takes the buffers
// proto.Unmarshal allocated.

func headerToPB(h raft.RPCHeader) *raftpb.RPCHeader {
	return &raftpb.RPCHeader{ProtocolVersion: int32(h.ProtocolVersion), Id: h.ID, Addr: h.Addr}
}

func headerFromPB(h *raftpb.RPCHeader) raft.RPCHeader {
	if h == nil {
		return raft.RPCHeader{}
	}
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(h.ProtocolVersion), ID: h.Id, Addr: h.Addr}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// errString and errFromString carry raft's own error alongside its
// response, as NetworkTransport does.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func errFromString(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

func appendReqToPB(group string, a *raft.AppendEntriesRequest) *raftpb.AppendEntriesRequest {
	req := &raftpb.AppendEntriesRequest{
		Group:             group,
		Header:            headerToPB(a.RPCHeader),
		Term:              a.Term,
		Leader:            a.Leader,
		PrevLogEntry:      a.PrevLogEntry,
		PrevLogTerm:       a.PrevLogTerm,
		LeaderCommitIndex: a.LeaderCommitIndex,
	}
	if n := len(a.Entries); n > 0 {
		slab := make([]raftpb.Log, n)
		req.Entries = make([]*raftpb.Log, n)
		for i, e := range a.Entries {
			l := &slab[i]
			l.Index, l.Term, l.Type = e.Index, e.Term, uint32(e.Type)
			l.Data, l.Extensions, l.AppendedAt = e.Data, e.Extensions, unixNano(e.AppendedAt)
			req.Entries[i] = l
		}
	}
	return req
}

func appendReqFromPB(r *raftpb.AppendEntriesRequest) *raft.AppendEntriesRequest {
	a := &raft.AppendEntriesRequest{
		RPCHeader:         headerFromPB(r.Header),
		Term:              r.Term,
		Leader:            r.Leader,
		PrevLogEntry:      r.PrevLogEntry,
		PrevLogTerm:       r.PrevLogTerm,
		LeaderCommitIndex: r.LeaderCommitIndex,
	}
	if n := len(r.Entries); n > 0 {
		slab := make([]raft.Log, n)
		a.Entries = make([]*raft.Log, n)
		for i, e := range r.Entries {
			l := &slab[i]
			l.Index, l.Term, l.Type = e.Index, e.Term, raft.LogType(e.Type)
			l.Data, l.Extensions, l.AppendedAt = e.Data, e.Extensions, fromUnixNano(e.AppendedAt)
			a.Entries[i] = l
		}
	}
	return a
}

func appendRespToPB(r *raft.AppendEntriesResponse, rpcErr error) *raftpb.AppendEntriesResponse {
	out := &raftpb.AppendEntriesResponse{Error: errString(rpcErr)}
	if r != nil {
		out.Header = headerToPB(r.RPCHeader)
		out.Term, out.LastLog, out.Success, out.NoRetryBackoff = r.Term, r.LastLog, r.Success, r.NoRetryBackoff
	}
	return out
}

// appendRespFromPB fills resp and returns raft's error, if any.
func appendRespFromPB(r *raftpb.AppendEntriesResponse, resp *raft.AppendEntriesResponse) error {
	*resp = raft.AppendEntriesResponse{
		RPCHeader:      headerFromPB(r.Header),
		Term:           r.Term,
		LastLog:        r.LastLog,
		Success:        r.Success,
		NoRetryBackoff: r.NoRetryBackoff,
	}
	return errFromString(r.Error)
}

// isHeartbeat is NetworkTransport's test for the heartbeat fast path: a
// term and a leader, and nothing else.
func isHeartbeat(a *raft.AppendEntriesRequest) bool {
	leaderAddr := a.RPCHeader.Addr
	if len(leaderAddr) == 0 {
		leaderAddr = a.Leader
	}
	return a.Term != 0 && len(leaderAddr) != 0 &&
		a.PrevLogEntry == 0 && a.PrevLogTerm == 0 &&
		len(a.Entries) == 0 && a.LeaderCommitIndex == 0
}

func voteReqToPB(group string, a *raft.RequestVoteRequest) *raftpb.RequestVoteRequest {
	return &raftpb.RequestVoteRequest{
		Group:              group,
		Header:             headerToPB(a.RPCHeader),
		Term:               a.Term,
		Candidate:          a.Candidate,
		LastLogIndex:       a.LastLogIndex,
		LastLogTerm:        a.LastLogTerm,
		LeadershipTransfer: a.LeadershipTransfer,
	}
}

func voteReqFromPB(r *raftpb.RequestVoteRequest) *raft.RequestVoteRequest {
	return &raft.RequestVoteRequest{
		RPCHeader:          headerFromPB(r.Header),
		Term:               r.Term,
		Candidate:          r.Candidate,
		LastLogIndex:       r.LastLogIndex,
		LastLogTerm:        r.LastLogTerm,
		LeadershipTransfer: r.LeadershipTransfer,
	}
}

func voteRespToPB(r *raft.RequestVoteResponse, rpcErr error) *raftpb.RequestVoteResponse {
	out := &raftpb.RequestVoteResponse{Error: errString(rpcErr)}
	if r != nil {
		out.Header = headerToPB(r.RPCHeader)
		out.Term, out.Peers, out.Granted = r.Term, r.Peers, r.Granted
	}
	return out
}

func voteRespFromPB(r *raftpb.RequestVoteResponse, resp *raft.RequestVoteResponse) error {
	*resp = raft.RequestVoteResponse{RPCHeader: headerFromPB(r.Header), Term: r.Term, Peers: r.Peers, Granted: r.Granted}
	return errFromString(r.Error)
}

func preVoteReqToPB(group string, a *raft.RequestPreVoteRequest) *raftpb.RequestPreVoteRequest {
	return &raftpb.RequestPreVoteRequest{
		Group:        group,
		Header:       headerToPB(a.RPCHeader),
		Term:         a.Term,
		LastLogIndex: a.LastLogIndex,
		LastLogTerm:  a.LastLogTerm,
	}
}

func preVoteReqFromPB(r *raftpb.RequestPreVoteRequest) *raft.RequestPreVoteRequest {
	return &raft.RequestPreVoteRequest{
		RPCHeader:    headerFromPB(r.Header),
		Term:         r.Term,
		LastLogIndex: r.LastLogIndex,
		LastLogTerm:  r.LastLogTerm,
	}
}

func preVoteRespToPB(r *raft.RequestPreVoteResponse, rpcErr error) *raftpb.RequestPreVoteResponse {
	out := &raftpb.RequestPreVoteResponse{Error: errString(rpcErr)}
	if r != nil {
		out.Header = headerToPB(r.RPCHeader)
		out.Term, out.Granted = r.Term, r.Granted
	}
	return out
}

func preVoteRespFromPB(r *raftpb.RequestPreVoteResponse, resp *raft.RequestPreVoteResponse) error {
	*resp = raft.RequestPreVoteResponse{RPCHeader: headerFromPB(r.Header), Term: r.Term, Granted: r.Granted}
	return errFromString(r.Error)
}

func timeoutNowRespToPB(r *raft.TimeoutNowResponse, rpcErr error) *raftpb.TimeoutNowResponse {
	out := &raftpb.TimeoutNowResponse{Error: errString(rpcErr)}
	if r != nil {
		out.Header = headerToPB(r.RPCHeader)
	}
	return out
}

func snapshotReqToPB(group string, a *raft.InstallSnapshotRequest) *raftpb.InstallSnapshotRequest {
	return &raftpb.InstallSnapshotRequest{
		Group:              group,
		Header:             headerToPB(a.RPCHeader),
		SnapshotVersion:    int32(a.SnapshotVersion),
		Term:               a.Term,
		Leader:             a.Leader,
		LastLogIndex:       a.LastLogIndex,
		LastLogTerm:        a.LastLogTerm,
		Peers:              a.Peers,
		Configuration:      a.Configuration,
		ConfigurationIndex: a.ConfigurationIndex,
		Size:               a.Size,
	}
}

func snapshotReqFromPB(r *raftpb.InstallSnapshotRequest) *raft.InstallSnapshotRequest {
	return &raft.InstallSnapshotRequest{
		RPCHeader:          headerFromPB(r.Header),
		SnapshotVersion:    raft.SnapshotVersion(r.SnapshotVersion),
		Term:               r.Term,
		Leader:             r.Leader,
		LastLogIndex:       r.LastLogIndex,
		LastLogTerm:        r.LastLogTerm,
		Peers:              r.Peers,
		Configuration:      r.Configuration,
		ConfigurationIndex: r.ConfigurationIndex,
		Size:               r.Size,
	}
}

func snapshotRespToPB(r *raft.InstallSnapshotResponse, rpcErr error) *raftpb.InstallSnapshotResponse {
	out := &raftpb.InstallSnapshotResponse{Error: errString(rpcErr)}
	if r != nil {
		out.Header = headerToPB(r.RPCHeader)
		out.Term, out.Success = r.Term, r.Success
	}
	return out
}

func snapshotRespFromPB(r *raftpb.InstallSnapshotResponse, resp *raft.InstallSnapshotResponse) error {
	*resp = raft.InstallSnapshotResponse{RPCHeader: headerFromPB(r.Header), Term: r.Term, Success: r.Success}
	return errFromString(r.Error)
}
