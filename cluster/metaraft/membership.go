package metaraft

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/proto/metapb"
)

// maxVoters is the largest number of voters AddServer makes: more voters
// make every commit wait for more acknowledgements without making the
// group survive more than two failures. Further members replicate as
// non-voters.
const maxVoters = 5

// AddServer adds a member at addr, as a voter while the group has fewer
// than 5 voters, else as a non-voter, and returns once the configuration
// change is committed. A member already present at addr is left alone; a
// member present at another address gets addr (keeping its suffrage).
// Forwarded to the leader when this node does not lead.
func (s *Store) AddServer(id, addr string) error {
	if id == "" || addr == "" {
		return errors.New("meta: AddServer needs an id and an addr")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.applyTimeout)
	defer cancel()
	return s.onLeader(ctx, "add server",
		func(ctx context.Context) error { return s.addServerLocal(ctx, id, addr) },
		func(ctx context.Context, c metapb.MetaClient) error {
			_, err := c.AddServer(ctx, &metapb.AddServerRequest{Id: id, Addr: addr})
			return err
		})
}

// RemoveServer removes member id (nothing when it is not one) and returns
// once the configuration change is committed.
func (s *Store) RemoveServer(id string) error {
	if id == "" {
		return errors.New("meta: RemoveServer needs an id")
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.applyTimeout)
	defer cancel()
	return s.onLeader(ctx, "remove server",
		func(ctx context.Context) error { return s.removeServerLocal(ctx, id) },
		func(ctx context.Context, c metapb.MetaClient) error {
			_, err := c.RemoveServer(ctx, &metapb.RemoveServerRequest{Id: id})
			return err
		})
}

func (s *Store) addServerLocal(ctx context.Context, id, addr string) error {
	s.confMu.Lock()
	defer s.confMu.Unlock()
	servers, err := s.configuration(ctx)
	if err != nil {
		return err
	}
	voters := 0
	var found *raft.Server
	for i, sv := range servers {
		if sv.Suffrage == raft.Voter {
			voters++
		}
		if sv.ID == raft.ServerID(id) {
			found = &servers[i]
		}
	}
	if found != nil && found.Address == raft.ServerAddress(addr) {
		return nil
	}
	voter := found == nil && voters < maxVoters || found != nil && found.Suffrage == raft.Voter
	timeout := remaining(ctx, s.applyTimeout)
	var f raft.IndexFuture
	if voter {
		f = s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout)
	} else {
		f = s.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout)
	}
	if err := wait(ctx, f); err != nil {
		return fmt.Errorf("meta: add server %s: %w", id, err)
	}
	s.log.Info("added metadata group member", "id", id, "addr", addr, "voter", voter)
	return nil
}

func (s *Store) removeServerLocal(ctx context.Context, id string) error {
	s.confMu.Lock()
	defer s.confMu.Unlock()
	servers, err := s.configuration(ctx)
	if err != nil {
		return err
	}
	present := false
	for _, sv := range servers {
		present = present || sv.ID == raft.ServerID(id)
	}
	if !present {
		return nil
	}
	if err := wait(ctx, s.raft.RemoveServer(raft.ServerID(id), 0, remaining(ctx, s.applyTimeout))); err != nil {
		return fmt.Errorf("meta: remove server %s: %w", id, err)
	}
	s.log.Info("removed metadata group member", "id", id)
	return nil
}

func (s *Store) configuration(ctx context.Context) ([]raft.Server, error) {
	f := s.raft.GetConfiguration()
	if err := wait(ctx, f); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// Servers returns the group's configuration as this node knows it (the
// latest, committed or not).
func (s *Store) Servers() ([]Server, error) {
	servers, err := s.configuration(context.Background())
	if err != nil {
		return nil, fmt.Errorf("meta: configuration: %w", err)
	}
	out := make([]Server, len(servers))
	for i, sv := range servers {
		out[i] = Server{ID: string(sv.ID), Addr: string(sv.Address), Voter: sv.Suffrage == raft.Voter}
	}
	return out, nil
}
