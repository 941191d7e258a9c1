package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/proto/memberpb"
	"github.com/warrenmq/warren/raftq/replica"
)

// Hibernation: idle queue groups close until they are needed.
//
// hashicorp/raft runs goroutines, channels and timers for every group
// whether it has work or not: per member its main loop, state machine and
// snapshot goroutines, per follower of a leader its replication and
// heartbeat goroutines, each with timers. With a thousand queues that is
// most of a node's idle CPU (the timers' wake-ups, the collector scanning
// five thousand stacks) and most of the memory the queues add, and raft
// offers no way to make an idle group cheaper. RabbitMQ's Ra has no such
// cost (an idle Ra server is a sleeping process); Warren closes the group
// instead: an idle queue's replicas shut raft down on every member and
// keep only what reopening needs (its log and state are on disk already).
//
// When: the leader's replica has appended nothing for HibernateAfter and
// MayHibernate holds (nothing stored, nobody consuming, no deadline ahead,
// no membership change half done): there is nothing a closed group would
// have to do by itself. How: the leader asks each follower's node
// (Member.Hibernate) to close its replica, which it does only if it
// follows that leader in that term and holds exactly the leader's log;
// then the leader closes its own, if it still leads and appended nothing
// meanwhile. A follower that cannot be reached and whose node gossip
// calls failed is left out, as long as a majority closes: when its node
// starts again it opens that replica, and its first question to the
// others wakes the group, which then sleeps again with it. Each member
// remembers the leader, which campaigns first when the group wakes, so
// leaders stay where the rebalancer put them, and notes the closing in
// its log, so that a node that restarts leaves the replica closed
// (hibernator.record).
//
// Waking: any request for the group opens it again where it arrives: a
// client's operation through a member's router (Router's Wake), a forwarded
// call to a member's node (replicaHost.lookup), a Raft request from a member
// that is awake (the transport's SetOnMissing), a membership change. The
// opened replica starts on its existing state, so it asks its group for a
// leader at once (replica's expectLeader); the question itself, a Raft
// request, wakes the members it reaches. Counting a queue (queue.declare's
// message count, warrenctl's listing) and asking for its members' status
// do not wake it: a hibernated queue is empty and unused.
//
// Why it is safe: closing a replica is what stopping its node does, and
// raft's safety does not depend on which members run; reopening is what
// starting it does. A follower that closes while its leader goes on (the
// leader did not close after all) is opened again by the leader's next
// request for an entry, or by its own first client request; the leader's
// heartbeats alone do not wake it (a leader that closes sends its last
// ones as it stops), and the leader appends a barrier when it gives up,
// which does.

const (
	// hibernateWorkers bounds the groups put to sleep at once.
	hibernateWorkers = 8
	// minHibernateCheck is the shortest time between two looks for idle
	// groups.
	minHibernateCheck = 100 * time.Millisecond
)

// hibernator puts the idle groups this node leads to sleep (loop). The
// replicas it closes, and those it wakes, change hands in replicaHost,
// under its locks; what the hibernator keeps of its own are the counts
// its loop frees memory by: slept, the replicas closed since the loop
// last looked (followers' too, closed at their leader's request), and
// opened, the replicas opened since.
type hibernator struct {
	c      *clusterNode
	slept  atomic.Int64
	opened atomic.Int64
}

// sleeper is a replica closed while its group hibernates.
type sleeper struct {
	leader     string // the member that led when the group went to sleep
	term, last uint64 // the replica's term and last log index then
}

// idleMark is when a leading replica was first seen with its last log
// index.
type idleMark struct {
	last  uint64
	since time.Time
}

// loop puts idle groups this node leads to sleep until the node
// stops.
func (hb *hibernator) loop() {
	defer hb.c.wg.Done()
	after := hb.c.cfg.HibernateAfter
	if after <= 0 {
		return
	}
	seen := map[string]idleMark{}
	var unreleased int
	var released time.Time
	for hb.c.sleep(max(after/4, minHibernateCheck)) {
		hb.idle(seen, after)
		// Followers' replicas close on the leaders' requests: count
		// those too (putToSleep).
		unreleased += int(hb.slept.Swap(0))
		busy := hb.opened.Swap(0) > 0
		if unreleased > 0 && !busy && time.Since(released) >= releaseGap {
			// What the closed groups held (their goroutines' stacks,
			// raft's buffers and channels) goes back to the system now
			// rather than as the runtime's scavenger gets to it, minutes
			// later for a node whose heap stopped growing: one garbage
			// collection, at most every releaseGap, and not while groups
			// open (a burst of declarations would take it back).
			debug.FreeOSMemory()
			unreleased, released = 0, time.Now()
		}
	}
}

// releaseGap is the shortest time between two returns of memory to the
// system after groups hibernated.
const releaseGap = 5 * time.Second

// idle puts to sleep the groups this node leads that have
// appended nothing for after and may hibernate.
func (hb *hibernator) idle(seen map[string]idleMark, after time.Duration) {
	now := time.Now()
	leading := map[string]bool{}
	var due []string
	for id, r := range hb.c.host.byID() {
		if !r.IsLeader() {
			continue
		}
		leading[id] = true
		last := r.LastIndex()
		if m, ok := seen[id]; !ok || m.last != last {
			seen[id] = idleMark{last: last, since: now}
			continue
		}
		if now.Sub(seen[id].since) >= after && r.MayHibernate() {
			due = append(due, id)
		}
	}
	for id := range seen {
		if !leading[id] {
			delete(seen, id)
		}
	}
	sem := make(chan struct{}, hibernateWorkers)
	var wg sync.WaitGroup
	for _, id := range due {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := hb.hibernate(id); err != nil {
				hb.c.log.Debug("queue group stays awake", "queue_id", id, "err", err)
			}
		})
	}
	wg.Wait()
}

// hibernate puts group id to sleep on every member, followers first; this
// node's replica leads it.
func (hb *hibernator) hibernate(id string) error {
	r, ok := hb.c.host.get(id)
	if !ok || !r.IsLeader() {
		return errors.New("not leading")
	}
	st := r.Status()
	servers, err := r.Servers()
	if err != nil {
		return err
	}
	req := &memberpb.HibernateRequest{QueueId: id, Leader: hb.c.self, Term: st.Term, LastIndex: st.LastLogIndex}
	type answer struct {
		down bool
		err  error
	}
	answers := make(chan answer, len(servers))
	for node := range servers {
		if node == hb.c.self {
			continue
		}
		go func() {
			rep, err := hb.c.members.call(context.Background(), node, func(ctx context.Context, cl memberpb.MemberClient) (any, error) {
				return cl.Hibernate(ctx, req)
			})
			if err != nil {
				// Unreachable, and down to gossip as well: its replica
				// opens when its node starts again, and its first
				// question to the others wakes the group.
				answers <- answer{down: !hb.c.gossipSeesAlive(node), err: errors.Join(errors.New(node), err)}
				return
			}
			if r := rep.(*memberpb.HibernateReply); !r.Ok {
				err = fmt.Errorf("%s: %s", node, r.Reason)
			}
			answers <- answer{err: err}
		}()
	}
	var refused []error
	down := 0
	for range len(servers) - 1 {
		switch a := <-answers; {
		case a.down:
			down++
		case a.err != nil:
			refused = append(refused, a.err)
		}
	}
	if len(servers)-down < len(servers)/2+1 {
		refused = append(refused, errors.New("too few members up"))
	}
	asleep := len(refused) == 0 && hb.c.host.putToSleep(id, sleeper{leader: hb.c.self, term: st.Term, last: st.LastLogIndex}, func(r *replica.Replica) bool {
		return r.IsLeader() && r.Status().LastLogIndex == st.LastLogIndex && r.MayHibernate()
	})
	if !asleep {
		// Followers that closed reopen on the barrier's AppendEntries.
		r.ResumeFollowers()
		return errors.Join(append(refused, errors.New("the group changed or a follower refused"))...)
	}
	hb.c.log.Debug("queue group hibernated", "queue_id", id, "term", st.Term, "index", st.LastLogIndex)
	return nil
}

// putToSleep closes this node's replica of group id if ok holds for it,
// keeping s to open it again.
func (h *replicaHost) putToSleep(id string, s sleeper, ok func(*replica.Replica) bool) bool {
	h.mu.Lock()
	q := h.queues[id]
	h.mu.Unlock()
	if q == nil {
		return false
	}
	// Under q.mu, which every change of the queue's replica holds, so
	// that ok's calls into raft need not hold h.mu.
	q.mu.Lock()
	defer q.mu.Unlock()
	r, open := h.get(id)
	if !open || !ok(r) {
		return false
	}
	h.mu.Lock()
	if h.replicas[id] != r { // the queue was deleted meanwhile
		h.mu.Unlock()
		return false
	}
	delete(h.replicas, id)
	h.asleep[id] = &s
	h.mu.Unlock()
	q.Router.SetMembers(q.members, nil)
	r.Close()
	h.c.hib.slept.Add(1)
	h.c.hib.record(q.cfg.WALGroup(), s)
	return true
}

// asleepKey is where a member notes in its group's stable store (the
// node's write-ahead log) that it closed while the group hibernated.
var asleepKey = []byte("WarrenHibernated")

// record notes s in the group's stable store, so that the node,
// restarted, leaves the replica closed (restored): opening it would
// ask the group for a leader, and a node that restarts would wake every
// hibernating group it holds at once, a thousand elections in a storm
// (some took a minute).
func (hb *hibernator) record(group string, s sleeper) {
	g, err := hb.c.qlog.Group(group)
	if err == nil {
		val := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, s.term), s.last)
		err = g.Set(asleepKey, append(val, s.leader...))
	}
	if err != nil {
		hb.c.log.Warn("cannot note that a queue group hibernates", "group", group, "err", err)
	}
}

// restored is the note record left for the group, if it still
// holds: the replica's term and last log index are those it closed with
// (its group has not elected or appended since, as far as it knows).
func (hb *hibernator) restored(group string) (sleeper, bool) {
	g, err := hb.c.qlog.Group(group)
	if err != nil {
		return sleeper{}, false
	}
	val, err := g.Get(asleepKey)
	if err != nil || len(val) < 16 {
		return sleeper{}, false
	}
	s := sleeper{term: binary.BigEndian.Uint64(val), last: binary.BigEndian.Uint64(val[8:]), leader: string(val[16:])}
	term, terr := g.GetUint64([]byte("CurrentTerm")) // raft's key
	last, lerr := g.LastIndex()
	return s, terr == nil && lerr == nil && term == s.term && last == s.last
}

// wake opens this node's replica of group id if it hibernates; it returns
// the replica open now, if any.
func (h *replicaHost) wake(id string) (*replica.Replica, bool) {
	h.mu.Lock()
	q, asleep := h.queues[id], h.asleep[id] != nil
	r, open := h.replicas[id]
	h.mu.Unlock()
	if open || !asleep || q == nil {
		return r, open
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return h.wakeLocked(q)
}

// wakeLocked is wake with q.mu held.
func (h *replicaHost) wakeLocked(q *clusterQueue) (*replica.Replica, bool) {
	h.mu.Lock()
	r, open := h.replicas[q.id]
	s := h.asleep[q.id]
	h.mu.Unlock()
	if open || s == nil {
		return r, open
	}
	cfg := q.cfg
	cfg.FirstCandidate = s.leader
	r, err := h.openReplica(q.id, cfg, q.members, false, true)
	if err != nil {
		h.c.log.Error("cannot wake the queue's member", "queue", q.cfg.Name, "err", err)
		return nil, false
	}
	h.mu.Lock()
	h.replicas[q.id] = r
	delete(h.asleep, q.id)
	h.mu.Unlock()
	q.Router.SetMembers(q.members, r)
	h.c.log.Debug("queue group woke", "queue", q.cfg.Name, "first_candidate", s.leader)
	return r, true
}

// isAsleep reports whether this node's replica of group id hibernates.
func (h *replicaHost) isAsleep(id string) bool {
	_, ok := h.sleeping(id)
	return ok
}

// sleeping is this node's record of its hibernating replica of id.
func (h *replicaHost) sleeping(id string) (sleeper, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.asleep[id]
	if s == nil {
		return sleeper{}, false
	}
	return *s, true
}

// Hibernate implements memberpb.MemberServer: this node's replica closes
// if it follows the asking leader in its term and holds exactly its log.
func (s memberServer) Hibernate(_ context.Context, req *memberpb.HibernateRequest) (*memberpb.HibernateReply, error) {
	why := "no open replica here"
	ok := s.c.host.putToSleep(req.QueueId, sleeper{leader: req.Leader, term: req.Term, last: req.LastIndex}, func(r *replica.Replica) bool {
		st := r.Status()
		switch {
		case st.State != "Follower" || r.Leader() != req.Leader:
			why = "does not follow " + req.Leader
		case st.Term != req.Term:
			why = "another term"
		case st.LastLogIndex != req.LastIndex:
			why = "another log"
		case r.Checkpointing():
			why = "taking a checkpoint"
		default:
			return true
		}
		return false
	})
	if ok {
		s.c.log.Debug("queue group hibernated", "queue_id", req.QueueId, "leader", req.Leader)
		return &memberpb.HibernateReply{Ok: true}, nil
	}
	return &memberpb.HibernateReply{Reason: why}, nil
}
