package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/proto/raftpb"
)

// InstallSnapshot implements raft.Transport: the request, then the data
// in snapshotChunk pieces, on the bulk connection to target, so that a
// large snapshot does not hold up the heartbeats of other groups. The
// call is allowed rpcTimeout per snapshotTimeoutScale bytes, as
// NetworkTransport does.
func (t *Transport) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if err := t.installSnapshot(target, args, resp, data); err != nil {
		return t.failReplication("InstallSnapshot", target, err)
	}
	return nil
}

func (t *Transport) installSnapshot(target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if t.ctx.Err() != nil {
		return raft.ErrTransportShutdown
	}
	cc, err := t.mux.pool.Bulk(string(target))
	if err != nil {
		return err
	}
	timeout := max(rpcTimeout*time.Duration(args.Size/snapshotTimeoutScale), rpcTimeout)
	ctx, cancel := context.WithTimeout(t.ctx, timeout)
	defer cancel()
	stream, err := raftpb.NewRaftClient(cc).InstallSnapshot(ctx)
	if err != nil {
		return err
	}
	err = stream.Send(&raftpb.InstallSnapshotChunk{Request: snapshotReqToPB(t.group, args)})
	buf := make([]byte, snapshotChunk)
	for err == nil {
		n, rerr := io.ReadFull(data, buf)
		if n > 0 {
			// Send marshals before it returns, so buf can be reused.
			err = stream.Send(&raftpb.InstallSnapshotChunk{Data: buf[:n]})
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("reading snapshot: %w", rerr)
		}
	}
	// io.EOF from Send: the server ended the call; its status comes
	// with CloseAndRecv.
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	out, err := stream.CloseAndRecv()
	if err != nil {
		return err
	}
	return snapshotRespFromPB(out, resp)
}
