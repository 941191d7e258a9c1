package forward

import (
	"context"
	"slices"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// localBox holds the router's current member (nil for none).
type localBox struct{ l Local }

// SetMembers changes the group's members and this node's member (nil when
// this node no longer holds one) after a membership change: the router
// asks the new members for the leader, and uses local once it leads.
//
// A member taken away is replaced by detached, which answers "not the
// leader": whatever was on its way to it (a publish, an attach) is
// resolved again and goes to the leader elsewhere. The caller deletes or
// closes the old member itself.
func (r *Router) SetMembers(members []string, local Local) { r.leaders.set(members, local) }

func (f *leaderFinder) set(members []string, local Local) {
	m := slices.Clone(members)
	f.members.Store(&m)
	f.localMember.Store(&localBox{l: local})
	if local == nil {
		f.mu.Lock()
		f.leader = "" // learn it again from the new members
		f.mu.Unlock()
	}
}

// names are the group's members as last set.
func (f *leaderFinder) names() []string { return *f.members.Load() }

// member is this node's member, nil when there is none.
func (f *leaderFinder) member() Local { return f.localMember.Load().l }

// local is this node's member for the paths that reached it while it led
// (pathLocal); detached when it has been taken away since.
func (f *leaderFinder) local() Local {
	if l := f.member(); l != nil {
		return l
	}
	return detached{}
}

// detached stands in for a member this node no longer holds: it leads
// nothing, so every operation is refused as by a follower.
type detached struct{}

var _ Local = detached{}

func (detached) Enqueue(_ context.Context, _ *queue.Message, done func(error)) error {
	if done != nil {
		done(replica.ErrNotLeader)
	}
	return replica.ErrNotLeader
}

func (detached) EnqueueAs(_ context.Context, _ *queue.Message, _, _ uint64, done func(error)) error {
	if done != nil {
		done(replica.ErrNotLeader)
	}
	return replica.ErrNotLeader
}

func (detached) Consume(queue.Consumer, queue.ConsumeOptions) error { return replica.ErrNotLeader }
func (detached) Cancel(queue.Consumer)                              {}
func (detached) Resume(queue.Consumer)                              {}
func (detached) Get(bool) (queue.Delivery, uint32, bool, error) {
	return queue.Delivery{}, 0, false, replica.ErrNotLeader
}
func (detached) Settle([]uint64)                           {}
func (detached) Requeue([]uint64, queue.ReturnCause)       {}
func (detached) Discard([]uint64, queue.ReturnCause)       {}
func (detached) Purge() (uint32, error)                    { return 0, replica.ErrNotLeader }
func (detached) Delete(bool, bool) (uint32, error)         { return 0, nil }
func (detached) Stats() queue.Stats                        { return queue.Stats{} }
func (detached) Close()                                    {}
func (detached) IsLeader() bool                            { return false }
func (detached) Leader() string                            { return "" }
func (detached) Reconfigure(wire.Table) error              { return replica.ErrNotLeader }
func (detached) SettleHeld([]replica.HeldSettlement) error { return replica.ErrNotLeader }
func (detached) Deliveries(uint64) []uint64                { return nil }
func (detached) GetAs(uint64, bool) (queue.Delivery, uint32, bool, error) {
	return queue.Delivery{}, 0, false, replica.ErrNotLeader
}
func (detached) SettleOwned([]replica.OwnedSettlement) error { return replica.ErrNotLeader }
func (detached) Knows([]uint64) bool                         { return false }
func (detached) DisconnectedTimeout() time.Duration          { return 0 }
func (detached) Disconnect(queue.Consumer) bool              { return false }
func (detached) Attached(uint64) bool                        { return false }
func (detached) Suspended(uint64) bool                       { return false }
