package meta

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/proto/metapb"
)

// CatchUp returns once this node's subscriber has been handed every
// change committed before the call (a read barrier: the leader's applied
// index after a barrier, then wait for it here). A node that misses a
// queue or exchange a client names calls it before answering "not
// found": the definition may have been committed through another node a
// moment ago.
func (s *Store) CatchUp(ctx context.Context) error {
	var index uint64
	err := s.onLeader(ctx, "catch up",
		func(ctx context.Context) error {
			var err error
			index, err = s.readIndexLocal(ctx)
			return err
		},
		func(ctx context.Context, c metapb.MetaClient) error {
			rep, err := c.ReadIndex(ctx, &metapb.ReadIndexRequest{})
			if err == nil {
				index = rep.Index
			}
			return err
		})
	if err != nil {
		return err
	}
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	// raft applies barriers and configuration changes without the FSM,
	// so first wait for raft to have applied as far, then for the
	// subscriber to have been handed what the FSM took in up to there.
	var fsmIndex uint64
	reached := false
	for {
		if !reached && s.raft.AppliedIndex() >= index {
			s.fsm.mu.Lock()
			fsmIndex = s.fsm.st.index
			s.fsm.mu.Unlock()
			reached = true
		}
		if reached && s.deliveredIndex() >= fsmIndex {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("meta: catch up to %d: %w", index, ctx.Err())
		case <-t.C:
		}
	}
}

// readIndexLocal is the leader's applied index once everything committed
// before is applied.
func (s *Store) readIndexLocal(ctx context.Context) (uint64, error) {
	if err := wait(ctx, s.raft.Barrier(remaining(ctx, 5*time.Second))); err != nil {
		return 0, err
	}
	s.noticeCommit() // the caller waits for its copy to reach the barrier
	return s.raft.AppliedIndex(), nil
}

// deliveredIndex is how far the subscriber has been handed changes (the
// applied state itself when nobody subscribed).
func (s *Store) deliveredIndex() uint64 {
	s.fsm.mu.Lock()
	sub, index := s.fsm.sub, s.fsm.st.index
	s.fsm.mu.Unlock()
	if sub == nil {
		return index
	}
	return sub.delivered.Load()
}

func (sv *service) ReadIndex(ctx context.Context, _ *metapb.ReadIndexRequest) (*metapb.ReadIndexReply, error) {
	if !sv.s.IsLeader() {
		return nil, errNotLeader
	}
	index, err := sv.s.readIndexLocal(ctx)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, toStatus(err)
	}
	return &metapb.ReadIndexReply{Index: index}, nil
}
