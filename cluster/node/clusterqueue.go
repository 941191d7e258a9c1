package node

import (
	"slices"
	"sync"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// clusterQueue is a replicated queue's engine on this node: the router,
// unregistered from the node when deleted or closed.
type clusterQueue struct {
	*forward.Router
	c  *clusterNode
	id string
	// cfg opens this node's replica when the node joins the group
	// (MembersChanged, below) or the group wakes (hibernate.go);
	// mu serializes such changes, and members, the group's members as
	// last set, is under it.
	cfg     replica.Config
	mu      sync.Mutex
	members []string
}

// A closing channel releases its consumers through the router.
var _ queue.Releaser = (*clusterQueue)(nil)

var (
	_ broker.MembersChanger = (*clusterQueue)(nil)
	_ forward.Local         = (*replica.Replica)(nil)
)

func (q *clusterQueue) Delete(ifUnused, ifEmpty bool) (uint32, error) {
	// A hibernating member opens to be deleted with its files, and to
	// count what the queue holds for delete-ok.
	q.c.host.wake(q.id)
	n, err := q.Router.Delete(ifUnused, ifEmpty)
	if err == nil {
		q.c.host.forget(q.id)
	}
	return n, err
}

func (q *clusterQueue) Close() {
	q.Router.Close()
	q.c.host.forget(q.id)
}

// MembersChanged implements broker.MembersChanger: this node opens its
// replica when it became a member (never bootstrapping: the leader sends
// it the log), removes it with its files when it stopped being one, and
// routes to the new members.
//
// Not while the node's metadata is catching up after a start: it then
// replays changes it may have applied before it stopped, and a member
// removed and added again (delete member, add member) would see its
// replica removed, files and all, and a new empty one opened, though the
// files were those of the member added again. The chaos harness saw it:
// the restarted node had just been elected leader of the queue, and its
// log, its votes and the entries only it and a dead node held were gone.
// Such a replica stays open, and is removed once the node has caught up
// if it is still not a member (removeFormerMembers).
func (q *clusterQueue) MembersChanged(members []string) {
	c := q.c
	q.mu.Lock()
	defer q.mu.Unlock()
	c.host.wakeLocked(q) // a hibernating member takes the change awake
	q.members = slices.Clone(members)
	local, had := c.host.get(q.id)
	member := slices.Contains(members, c.self)
	switch {
	case member && !had && c.quar.holds(q.id):
		q.Router.SetMembers(members, nil) // it opens as it re-syncs (resync.go)
		c.quar.wake()
	case member && !had:
		r, err := c.host.openReplica(q.id, q.cfg, members, false, true)
		if err != nil {
			c.log.Error("cannot open the queue's new member", "queue", q.cfg.Name, "err", err)
			q.Router.SetMembers(members, nil)
			return
		}
		q.setLocalLocked(r)
		c.log.Info("this node became a member of the queue", "queue", q.cfg.Name)
	case !member && had && !c.meta.CaughtUp():
		q.Router.SetMembers(members, nil)
		c.log.Debug("not removing this node's member of the queue before catching up", "queue", q.cfg.Name)
	case !member && had:
		q.removeLocalLocked(local)
	case had:
		q.Router.SetMembers(members, local)
	default:
		q.Router.SetMembers(members, nil)
	}
}

// removeLocalLocked removes this node's replica of the queue, with its
// files, and routes to the members; q.mu held.
func (q *clusterQueue) removeLocalLocked(local *replica.Replica) {
	q.setLocalLocked(nil)
	local.Remove()
	q.c.log.Info("this node's member of the queue was removed", "queue", q.cfg.Name)
}

// setLocalLocked makes r this node's open replica of the queue (nil:
// none), for the node and for the queue's router, which routes to
// q.members; q.mu held.
func (q *clusterQueue) setLocalLocked(r *replica.Replica) {
	q.c.host.setOpen(q.id, r)
	if r == nil {
		// A nil interface, not an interface holding a nil *Replica: the
		// router would take that for a local member.
		q.Router.SetMembers(q.members, nil)
		return
	}
	q.Router.SetMembers(q.members, r)
}
