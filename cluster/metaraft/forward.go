package metaraft

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/proto/metapb"
)

// errNoLeader: this node knows no leader at the moment.
var errNoLeader = errors.New("meta: no known leader")

// Apply proposes changes as one atomic entry and returns once it is
// committed and applied on the leader (this node's copy may apply it a
// moment later). An IfAbsent change whose record exists makes the whole
// entry a no-op and Apply returns metadata.ErrExists. It keeps trying
// across leader changes for up to 10 s.
func (s *Store) Apply(changes ...catalog.Change) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.applyTimeout)
	defer cancel()
	return s.ApplyContext(ctx, changes...)
}

// ApplyContext is Apply bounded by ctx instead of 10 s.
func (s *Store) ApplyContext(ctx context.Context, changes ...catalog.Change) error {
	if len(changes) == 0 {
		return nil
	}
	data, err := encodeEntry(&entry{Origin: s.origin, ID: randomID(16), Changes: changes})
	if err != nil {
		return err
	}
	return s.onLeader(ctx, "apply",
		func(ctx context.Context) error { return s.applyLocal(ctx, data) },
		func(ctx context.Context, c metapb.MetaClient) error {
			rep, err := c.Apply(ctx, &metapb.ApplyRequest{Entry: data})
			if err == nil && rep.Exists {
				return catalog.ErrExists
			}
			return err
		})
}

// applyLocal proposes an encoded entry on this node, which must lead.
func (s *Store) applyLocal(ctx context.Context, data []byte) error {
	f := s.raft.Apply(data, remaining(ctx, s.applyTimeout))
	if err := wait(ctx, f); err != nil {
		return err
	}
	s.noticeCommit()
	s.awaitFollowers(ctx, f.Index())
	r, ok := f.Response().(result)
	if !ok {
		return fmt.Errorf("meta: unexpected apply response %T", f.Response())
	}
	if r.exists {
		return catalog.ErrExists
	}
	return nil
}

// onLeader runs local when this node leads, or remote against the
// leader's Meta service otherwise, until one succeeds or fails for a
// reason other than leadership, or ctx ends. A retried call may have
// taken effect already: callers make their operations idempotent.
func (s *Store) onLeader(ctx context.Context, what string, local func(context.Context) error, remote func(context.Context, metapb.MetaClient) error) error {
	backoff := 20 * time.Millisecond
	for {
		select {
		case <-s.closed:
			return ErrClosed
		default:
		}
		var err error
		if s.IsLeader() {
			err = local(ctx)
		} else if _, addr := s.Leader(); addr == "" {
			err = errNoLeader
		} else if conn, cerr := s.cfg.Pool.Conn(addr); cerr != nil {
			err = cerr
		} else {
			err = remote(ctx, metapb.NewMetaClient(conn))
		}
		if err == nil || errors.Is(err, catalog.ErrExists) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("meta: %s: no leader reached or no commit in time: %w", what, err)
		}
		if !retryable(err) {
			return err
		}
		s.log.Debug("retrying on the leader", "op", what, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("meta: %s: no leader reached or no commit in time: %w", what, err)
		case <-s.closed:
			t.Stop()
			return ErrClosed
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// retryable reports whether err means "ask the leader again": the leader
// moved, or could not be reached.
func retryable(err error) bool {
	switch {
	case errors.Is(err, errNoLeader),
		errors.Is(err, raft.ErrNotLeader),
		errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress),
		errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrAbortedByRestore):
		return true
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.FailedPrecondition:
			return true
		}
	}
	return false
}

// wait waits for f, or for ctx to end first.
func wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// remaining is the time left before ctx's deadline, or def without one.
func remaining(ctx context.Context, def time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return def
}

// service is the Meta gRPC service: what followers forward to the leader.
type service struct {
	metapb.UnimplementedMetaServer
	s *Store
}

var errNotLeader = status.Error(codes.FailedPrecondition, "meta: this node does not lead the metadata group")

func (sv *service) Apply(ctx context.Context, req *metapb.ApplyRequest) (*metapb.ApplyReply, error) {
	// Never let an entry that would not decode into the log: every
	// member would stop on it.
	if _, err := decodeEntry(req.Entry); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if !sv.s.IsLeader() {
		return nil, errNotLeader
	}
	err := sv.s.applyLocal(ctx, req.Entry)
	if errors.Is(err, catalog.ErrExists) {
		return &metapb.ApplyReply{Exists: true}, nil
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &metapb.ApplyReply{}, nil
}

func (sv *service) AddServer(ctx context.Context, req *metapb.AddServerRequest) (*metapb.AddServerReply, error) {
	if req.Id == "" || req.Addr == "" {
		return nil, status.Error(codes.InvalidArgument, "meta: AddServer needs an id and an addr")
	}
	if !sv.s.IsLeader() {
		return nil, errNotLeader
	}
	if err := sv.s.addServerLocal(ctx, req.Id, req.Addr); err != nil {
		return nil, toStatus(err)
	}
	return &metapb.AddServerReply{}, nil
}

func (sv *service) RemoveServer(ctx context.Context, req *metapb.RemoveServerRequest) (*metapb.RemoveServerReply, error) {
	if req.Id == "" {
		return nil, status.Error(codes.InvalidArgument, "meta: RemoveServer needs an id")
	}
	if !sv.s.IsLeader() {
		return nil, errNotLeader
	}
	if err := sv.s.removeServerLocal(ctx, req.Id); err != nil {
		return nil, toStatus(err)
	}
	return &metapb.RemoveServerReply{}, nil
}

// toStatus maps a local error to the code the forwarding node acts on.
func toStatus(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return errNotLeader
	case retryable(err), errors.Is(err, raft.ErrRaftShutdown):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Internal, err.Error())
}
