package node

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/proto/adminpb"
)

// Queue membership reconciliation, as RabbitMQ 4.x's continuous membership
// reconciliation (rabbit_quorum_queue_periodic_membership_reconciliation),
// on by default in Warren: the metadata leader grows every quorum queue
// with a target size (x-quorum-target-group-size, policy
// target-group-size: broker.TargetGroupSize) and fewer members than that
// onto alive nodes that hold none of its replicas. A round runs every
// ReconcileInterval, and ReconcileDelay after gossip reports a node
// joining, failing, leaving or coming back; a round that changed something
// (or stopped at maxReconcileAdds) is followed by another after
// ReconcileDelay, as RabbitMQ's trigger_interval.
//
// RabbitMQ's rules, followed here, per queue and round:
//   - no target (neither argument nor policy) means no reconciliation: the
//     initial group size is not a target;
//   - at most one member is added per queue per round;
//   - every current member's node must be alive: a failed node is waited
//     for, not replaced (node failure alone never grows a queue);
//   - a queue of odd size grows only if two nodes are available, so that
//     it can reach the next odd size;
//   - candidates exclude nodes being drained (here: PlacementNodes, where
//     drained nodes are to be left out).
//
// Warren picks the candidate holding the fewest replicas (RabbitMQ picks
// at random) and adds it with AddMember: a non-voter, promoted once it
// has caught up. RabbitMQ's auto_remove (dropping members on nodes that
// left the cluster) is not done.
//
// The same loop rebalances queue leaders once after a node rejoins
// (gossip reports it alive after failing or leaving, or with a new start
// however quick its restart), ReconcileDelay
// later: the planner of `warrenctl rebalance` (admin.Server.Rebalance) on
// every quorum queue.

const (
	// defaultReconcileInterval is RabbitMQ's
	// quorum_queue.continuous_membership_reconciliation.interval.
	defaultReconcileInterval = 60 * time.Minute
	// defaultReconcileDelay is its trigger_interval.
	defaultReconcileDelay = 10 * time.Second
	// maxReconcileAdds bounds the members one round adds: each waits for
	// its new member to catch up.
	maxReconcileAdds = 16
	// maxRebalanceAttempts bounds the retries of a rebalance whose
	// rejoined nodes' replicas did not answer yet or whose moves failed:
	// a restarted node's replicas take a while to open and catch up.
	maxRebalanceAttempts = 30
	// minRebalanceRetry spaces the retries however short the delay: the
	// leaders' replication to a node that was down backs off up to about
	// ten seconds (raft's), and its replicas cannot take leadership
	// before they catch up, so the attempts must outlast that.
	minRebalanceRetry = time.Second
	rebalanceTimeout  = 2 * time.Minute
)

// reconciler runs the reconcile loop (loop) on every node, and keeps
// what gossip events tell it: the lead loop writes that (event), the
// reconcile loop reads it; mu guards it.
type reconciler struct {
	c    *clusterNode
	kick chan struct{} // one pending wake-up

	mu        sync.Mutex
	gone      map[string]bool // nodes gossip reported failed or departed
	due       bool            // a round is due after the delay
	rejoined  map[string]bool // nodes back since the last rebalance
	rebalance bool
}

func newReconciler(c *clusterNode) *reconciler {
	return &reconciler{c: c, kick: make(chan struct{}, 1), gone: map[string]bool{}, rejoined: map[string]bool{}}
}

// times are the interval and trigger delay in effect.
func (r *reconciler) times() (interval, delay time.Duration) {
	interval, delay = r.c.cfg.ReconcileInterval, r.c.cfg.ReconcileDelay
	if interval <= 0 {
		interval = defaultReconcileInterval
	}
	if delay <= 0 {
		delay = min(defaultReconcileDelay, interval)
	}
	return interval, delay
}

// event records a gossip event for the reconcile loop; it never
// blocks (the lead loop calls it). restarted is failover.event's verdict: a
// node that restarted quicker than gossip's failure detection rejoins
// without having been reported gone, on some nodes or all (its graceful
// leave may reach some and not others), and leads nothing after its
// restart, as after a failure.
func (r *reconciler) event(ev membership.Event, restarted bool) {
	name := ev.Member.Name
	if name == r.c.self {
		return
	}
	r.mu.Lock()
	switch ev.Kind {
	case membership.Failed, membership.Departed:
		r.gone[name] = true
		r.due = true
	case membership.Joined, membership.Updated:
		if r.gone[name] || restarted {
			delete(r.gone, name)
			r.rejoined[name] = true
			r.rebalance = true
			r.due = true
		}
		if ev.Kind == membership.Joined {
			r.due = true
		}
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// take returns and clears what the events asked for.
func (r *reconciler) take() (due, rebalance bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	due, rebalance = r.due, r.rebalance
	r.due, r.rebalance = false, false
	return due, rebalance
}

// loop runs rounds and rebalances on every node; only the
// metadata leader acts.
func (r *reconciler) loop(b *broker.Broker) {
	defer r.c.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	interval, delay := r.times()
	round := time.NewTimer(interval)
	defer round.Stop()
	var rebalance <-chan time.Time
	attempts := 0
	for {
		select {
		case <-r.c.stop:
			return
		case <-r.kick:
			due, rebal := r.take()
			if due && !r.c.cfg.NoQueueReconcile {
				round.Reset(delay)
			}
			if rebal && !r.c.cfg.NoRebalanceOnRejoin {
				rebalance, attempts = time.After(delay), 0
			}
		case <-round.C:
			next := interval
			if !r.c.cfg.NoQueueReconcile && r.c.meta.IsLeader() && r.runRound(ctx, b) {
				next = delay
			}
			round.Reset(next)
		case <-rebalance:
			rebalance = nil
			if r.c.meta.IsLeader() && !r.rebalanceRejoined(ctx) && attempts < maxRebalanceAttempts {
				attempts++
				rebalance = time.After(max(delay, minRebalanceRetry))
			}
		}
	}
}

// runRound adds at most one member to each quorum queue below its
// target (and at most maxReconcileAdds in all). It reports whether it
// tried anything, or stopped with work left: then the next round comes
// after the trigger delay rather than the interval.
func (r *reconciler) runRound(ctx context.Context, b *broker.Broker) bool {
	alive := map[string]bool{r.c.self: true}
	for _, m := range r.c.aliveMembers() {
		alive[m.Name] = true
	}
	placeable := r.c.PlacementNodes()
	var queues []broker.QueueSummary
	replicas := map[string]int{} // quorum queue members per node
	for _, q := range b.Queues("") {
		if q.Record.Type != broker.QueueTypeQuorum || q.Record.ID == "" {
			continue
		}
		queues = append(queues, q)
		for _, m := range q.Record.Members {
			replicas[m]++
		}
	}
	worked, added := false, 0
	for _, q := range queues {
		rec := q.Record
		target := b.TargetGroupSize(rec)
		if len(rec.Members) >= target {
			continue
		}
		if slices.ContainsFunc(rec.Members, func(m string) bool { return !alive[m] }) {
			continue // a member's node is down: wait for it
		}
		candidates := slices.DeleteFunc(slices.Clone(placeable), func(n string) bool { return slices.Contains(rec.Members, n) })
		if len(candidates) == 0 || (len(rec.Members)%2 == 1 && len(candidates) < 2) {
			continue
		}
		if added >= maxReconcileAdds || ctx.Err() != nil {
			return true
		}
		to := fewestReplicas(candidates, replicas)
		worked = true
		actx, cancel := context.WithTimeout(ctx, memberChangeTimeout)
		err := r.c.members.add(actx, b, rec.Vhost, rec.Name, to, Promotable)
		cancel()
		if err != nil {
			r.c.log.Warn("reconcile: could not add a queue member", "queue", rec.Vhost+"/"+rec.Name, "node", to, "target", target, "err", err)
			continue
		}
		replicas[to]++
		added++
		r.c.log.Info("reconcile: queue grown towards its target size", "queue", rec.Vhost+"/"+rec.Name, "node", to,
			"members", len(rec.Members)+1, "target", target)
	}
	return worked
}

// fewestReplicas is the node among candidates (not empty) that holds the
// fewest quorum queue members by replicas, the first by name of those.
func fewestReplicas(candidates []string, replicas map[string]int) string {
	return slices.MinFunc(candidates, func(a, b string) int {
		return cmp.Or(cmp.Compare(replicas[a], replicas[b]), strings.Compare(a, b))
	})
}

// rebalanceRejoined moves queue leaders as `warrenctl rebalance` does. It
// reports whether that is done: it moved leaders, or every rejoined node
// answered with its replicas (so the spread it left is the one it aims
// for). Otherwise the loop tries again later.
func (r *reconciler) rebalanceRejoined(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, rebalanceTimeout)
	defer cancel()
	resp, err := r.c.adminSrv.Rebalance(ctx, &adminpb.RebalanceRequest{})
	if err != nil {
		r.c.log.Warn("rebalance after a node rejoined", "err", err)
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Done when every rejoined node answered with its replicas (so the
	// spread aimed at includes it) and no move failed; else try again.
	done := true
	for n := range r.rejoined {
		if !slices.ContainsFunc(resp.Nodes, func(l *adminpb.NodeLeaders) bool { return l.Node == n }) {
			done = false
		}
	}
	for _, m := range resp.Moves {
		if m.Error != "" {
			done = false
		}
	}
	// And when the spread is even: a rejoined node's replicas may still
	// be catching up (not followers yet), which leaves them no moves.
	lo, hi := -1, 0
	for _, n := range resp.Nodes {
		if lo < 0 || int(n.After) < lo {
			lo = int(n.After)
		}
		hi = max(hi, int(n.After))
	}
	if hi-lo > 1 {
		done = false
	}
	if done {
		clear(r.rejoined)
	}
	if len(resp.Moves) > 0 {
		r.c.log.Info("rebalanced queue leaders after a node rejoined", "moves", len(resp.Moves))
	}
	return done
}
