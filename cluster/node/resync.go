package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/proto/memberpb"
)

// The re-sync of quarantined queue members (quarantine.go), one group at
// a time, tried again while any is left: a group without a reachable
// leader waits, and says why, until a majority of its other members is
// back.

const (
	// resyncRetry is how long the loop waits before trying the groups
	// left again.
	resyncRetry = 2 * time.Second
	// leaderLookup bounds the search for a group's leader in one try.
	leaderLookup = 5 * time.Second
)

// resyncer drives the re-syncs of the node's quarantined groups.
type resyncer struct {
	c *clusterNode
	b *broker.Broker
}

// loop re-syncs the quarantined groups until none is left or the node
// stops.
func (r resyncer) loop() {
	c, b := r.c, r.b
	defer c.wg.Done()
	for {
		ids := c.quar.ids()
		for _, id := range ids {
			if r.stopping() {
				return
			}
			done, why := r.resync(b, id)
			switch {
			case done:
				if err := c.quar.done(id); err != nil {
					c.log.Error("cannot take a re-synced group off the quarantine list", "group", id, "err", err)
				}
				if len(c.quar.ids()) == 0 {
					c.log.Info("quarantine over: every queue member set aside after storage damage is re-synced")
				}
			case c.quar.wait(id, why):
				c.log.Warn("quarantined queue member not re-synced yet", "group", id, "waiting", why)
			}
		}
		select {
		case <-c.stop:
			return
		case <-c.quar.kick:
		case <-time.After(resyncRetry):
		}
	}
}

// context is a context that ends after d, or when the node stops.
func (r resyncer) context(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-r.c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (r resyncer) stopping() bool {
	c := r.c
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// resync takes group id's member here through its re-sync: out of the
// group's configuration, opened empty, added back as a non-voter and
// promoted once caught up. It reports whether the group is done with
// (re-synced, or no longer a member here), else why it waits.
func (r resyncer) resync(b *broker.Broker, id string) (bool, string) {
	c := r.c
	q := c.host.router(id)
	if q == nil {
		if c.meta.CaughtUp() && !r.recordNames(b, id) {
			c.log.Info("quarantined queue member dropped: its queue is gone, or has no member here any more", "group", id)
			return true, ""
		}
		return false, r.metadataWait()
	}
	q.mu.Lock()
	members := slices.Clone(q.members)
	q.mu.Unlock()
	if !slices.Contains(members, c.self) {
		if c.meta.CaughtUp() {
			c.log.Info("quarantined queue member dropped: the queue has no member here any more", "queue", q.cfg.Name)
			return true, ""
		}
		return false, r.metadataWait()
	}
	others := slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == c.self })
	if len(others) == 0 {
		return false, "the queue has no other member to re-sync from; its last copy is in the files set aside"
	}
	if _, open := c.host.get(id); !open {
		if why := r.leaveGroup(q.cfg.Name, id, others); why != "" {
			return false, why
		}
		if why := r.openEmpty(q, id); why != "" {
			return false, why
		}
	}
	ctx, cancel := r.context(memberChangeTimeout)
	defer cancel()
	rec, ok := recordOf(b, id)
	if !ok {
		return false, r.metadataWait()
	}
	err := c.members.add(ctx, b, rec.Vhost, rec.Name, c.self, Promotable)
	if err != nil && !(errors.Is(err, ErrMembershipRefused) && r.votes(id)) {
		return false, fmt.Sprintf("adding the member back: %v", err)
	}
	c.log.Info("quarantined queue member re-synced: caught up from the group and a voter again", "queue", q.cfg.Name)
	return true, ""
}

// leaveGroup has the leader of group id, found among others, remove this
// node from the group's configuration, if it is still there. It returns
// why it could not, or "".
func (r resyncer) leaveGroup(name, id string, others []string) string {
	c := r.c
	qm := c.members
	qm.mu.Lock()
	defer qm.mu.Unlock()
	ctx, cancel := r.context(leaderLookup)
	defer cancel()
	leader, err := qm.leader(ctx, id, others)
	if err != nil {
		return fmt.Sprintf("no leader among the other members (%s): a majority of the group is unreachable, and only its leader can re-sync this member",
			strings.Join(others, ", "))
	}
	ls, err := qm.status(ctx, leader, id)
	if err != nil {
		return fmt.Sprintf("asking the leader %s: %v", leader, err)
	}
	if _, in := ls.Servers[c.self]; !in {
		return ""
	}
	ctx, cancel = r.context(memberChangeTimeout)
	defer cancel()
	if _, err := qm.change(ctx, id, others, memberpb.ChangeOp_REMOVE_SERVER, c.self, ""); err != nil {
		return fmt.Sprintf("removing this member from the group: %v", err)
	}
	c.log.Info("quarantined queue member removed from its group's configuration, to join again empty", "queue", name, "leader", leader)
	return ""
}

// openEmpty opens this node's member of group id on its empty (or
// partly re-synced) storage: it neither bootstraps nor campaigns, and
// waits for the leader to add it.
func (r resyncer) openEmpty(q *clusterQueue, id string) string {
	c := r.c
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, open := c.host.get(id); open {
		return ""
	}
	local, err := c.host.openReplica(id, q.cfg, q.members, false, true)
	if err != nil {
		return fmt.Sprintf("opening the empty member: %v", err)
	}
	c.quar.setOpen(id)
	q.setLocalLocked(local)
	return ""
}

// metadataWait says why a group's record is not to be trusted yet.
func (r resyncer) metadataWait() string {
	c := r.c
	if leader, _ := c.meta.Leader(); leader == "" {
		return "no metadata leader known: the queue's record and members are not known here yet (is a majority of the cluster's nodes unreachable?)"
	}
	return "waiting for this node's metadata to catch up with the leader's"
}

// votes reports whether this node's open member of group id is a voter.
func (r resyncer) votes(id string) bool {
	c := r.c
	local, ok := c.host.get(id)
	if !ok {
		return false
	}
	return local.Status().Voter
}

// recordNames reports whether a queue record of group id names this node.
func (r resyncer) recordNames(b *broker.Broker, id string) bool {
	c := r.c
	rec, ok := recordOf(b, id)
	return ok && slices.Contains(rec.Members, c.self)
}

// recordOf is the record of the queue whose group is id.
func recordOf(b *broker.Broker, id string) (catalog.Queue, bool) {
	for _, q := range b.Queues("") {
		if q.Record.ID == id {
			return q.Record, true
		}
	}
	return catalog.Queue{}, false
}

// errQuarantined: a member's storage was found damaged as it opened, and
// the group is quarantined instead.
var errQuarantined = errors.New("queue member quarantined: its storage is damaged")

// quarantineGroup sets aside the damaged storage of group id's member (its
// directory and its part of the node's log) and lists the group for a
// re-sync. h.groupMu is held (openReplica).
func (h *replicaHost) quarantineGroup(id, dir string, cause error) error {
	if err := h.c.quar.setAsideGroup(id, dir, cause); err != nil {
		return fmt.Errorf("%w; setting it aside failed: %v", cause, err)
	}
	if err := h.c.qlog.DropGroup(id); err != nil {
		h.c.log.Warn("drop the damaged member's log", "group", id, "err", err)
	}
	h.mu.Lock()
	delete(h.asleep, id)
	h.mu.Unlock()
	return fmt.Errorf("%w: %v", errQuarantined, cause)
}
