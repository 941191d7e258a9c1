package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/warrenmq/warren/cluster/admin"
)

// adminError tells the admin service what kind of failure a membership
// operation met.
func adminError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNoQueue):
		return fmt.Errorf("%w: %w", admin.ErrNotFound, err)
	case errors.Is(err, ErrNotQuorumQueue):
		return fmt.Errorf("%w: %w", admin.ErrNotQuorum, err)
	case errors.Is(err, ErrMembershipRefused), errors.Is(err, ErrNotClustered):
		return fmt.Errorf("%w: %w", admin.ErrRefused, err)
	}
	return err
}

// adminErrors is adminError for each of a grow's or shrink's errors.
func adminErrors(err error) error {
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		return adminError(err)
	}
	var out []error
	for _, e := range joined.Unwrap() {
		out = append(out, adminError(e))
	}
	return errors.Join(out...)
}

// memberAdmin makes the queue membership changes warrenctl asks for
// (membership.go), their errors told apart for the service.
type memberAdmin struct{ n *Node }

func (a memberAdmin) AddMember(_ context.Context, vhost, name, node, membership string) error {
	return adminError(a.n.AddMember(vhost, name, node, Membership(membership)))
}

func (a memberAdmin) DeleteMember(_ context.Context, vhost, name, node string, force bool) error {
	return adminError(a.n.DeleteMember(vhost, name, node, force))
}

func (a memberAdmin) Grow(_ context.Context, node, vhostPattern, queuePattern, strategy, membership string) ([]string, error) {
	changed, err := a.n.Grow(node, vhostPattern, queuePattern, GrowStrategy(strategy), Membership(membership))
	return changed, adminErrors(err)
}

// GrowToCount implements admin.GrowToCountBackend.
func (a memberAdmin) GrowToCount(_ context.Context, count int, vhostPattern, queuePattern, strategy, membership string) ([]admin.AddedMember, error) {
	added, err := a.n.GrowToCount(count, vhostPattern, queuePattern, GrowStrategy(strategy), Membership(membership))
	out := make([]admin.AddedMember, len(added))
	for i, m := range added {
		out[i] = admin.AddedMember(m)
	}
	return out, adminErrors(err)
}

func (a memberAdmin) Shrink(_ context.Context, node string) ([]string, error) {
	changed, err := a.n.Shrink(node)
	return changed, adminErrors(err)
}
