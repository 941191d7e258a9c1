package replica

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// core is what every part of a replica shares: the queue's identity and
// configuration, the raft member and the machine it applies, and the
// replica's lifetime (done, the wait group of its goroutines, stopped).
// Replica embeds it, so that the parts reach it as r.raft, r.cfg, and so
// that its queries and membership calls are Replica's API; its methods
// use nothing but these fields.
type core struct {
	name string
	dir  string
	log  *slog.Logger
	cfg  Config
	raft *raft.Raft
	// leaderOf is raft, published for the FSM goroutine, which starts
	// applying (replaying the log) before NewRaft returns.
	leaderOf atomic.Pointer[raft.Raft]
	fsm      *fsm
	// trans is a one-member group's in-memory transport.
	trans *raft.InmemTransport

	// idBase and nextID make this member's consumer IDs; getter is
	// the one its own basic.gets are checked out to.
	idBase uint64
	nextID atomic.Uint64
	getter raftq.ConsumerID

	// leaderApplied is set while this member leads and has applied
	// every entry committed before its election (watch.go's barrier).
	leaderApplied atomic.Bool
	// commitLatency is the time from appending to applying of the last
	// entry this member applied as the leader that appended it, in
	// nanoseconds (CommitLatency).
	commitLatency atomic.Int64

	// stopErr is why it stopped: queue.ErrDeleted once deleted, else
	// ErrNotLeader (closed with its node, or while its group hibernates),
	// which tells a forwarder to send the publish again to whichever
	// member leads. Set before stopped.
	stopErr atomic.Pointer[error]
	stopped atomic.Bool
	done    chan struct{}
	wg      sync.WaitGroup
	// goMu and goStopped start goroutines on demand (goTracked, the
	// settler, the watcher), and never after shutdown began (its
	// wg.Wait).
	goMu      sync.Mutex
	goStopped bool
}

func (c *core) isLeader() bool {
	ra := c.leaderOf.Load()
	return ra != nil && ra.State() == raft.Leader
}

func (c *core) newConsumerID() raftq.ConsumerID {
	return raftq.ConsumerID(c.idBase | (c.nextID.Add(1) & 0xffffffff))
}

// awaitLeadership waits until this member leads and has applied every
// committed entry (a barrier), so that its answers reflect the whole log.
func (c *core) awaitLeadership(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !c.isLeader() {
		if time.Now().After(deadline) {
			return fmt.Errorf("queue %s: no leader after %v", c.name, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.raft.Barrier(timeout).Error(); err != nil {
		return fmt.Errorf("queue %s: barrier: %w", c.name, err)
	}
	return nil
}

// propose stamps the leader's time into cmd and appends it to the log.
func (c *core) propose(cmd *raftq.Command) raft.ApplyFuture {
	return c.raft.Apply(stamped(cmd), 0)
}

// wait returns f's error, or raft.ErrRaftShutdown once the replica stops:
// raft leaves Apply futures that were still queued at shutdown unanswered.
func (c *core) wait(f raft.Future) error { return c.waitNudging(context.Background(), f, 0, nil) }

// waitUntil is wait, giving up with ctx's error when ctx ends first; f
// goes on inside raft.
func (c *core) waitUntil(ctx context.Context, f raft.Future) error {
	return c.waitNudging(ctx, f, 0, nil)
}

// waitNudging is waitUntil, calling nudge every interval while f is
// unanswered (never if nudge is nil).
func (c *core) waitNudging(ctx context.Context, f raft.Future, interval time.Duration, nudge func()) error {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	var tick <-chan time.Time
	if nudge != nil {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case err := <-errc:
			return err
		case <-tick:
			nudge()
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return raft.ErrRaftShutdown
		}
	}
}

// goTracked runs fn on a goroutine of the replica's wait group, which
// must call wg.Done; false once the replica is stopping.
func (c *core) goTracked(fn func()) bool {
	c.goMu.Lock()
	defer c.goMu.Unlock()
	if c.goStopped {
		return false
	}
	c.wg.Add(1)
	go fn()
	return true
}

// sleep waits d, or until the replica closes: false then.
func (c *core) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

// stoppedErr is the answer to a publish that reaches the replica once it
// has stopped. A Publish stream opened before a hibernation holds the
// closed replica: "not the leader" ends that stream, and the forwarder
// finds the reopened one.
func (c *core) stoppedErr() error {
	if err := c.stopErr.Load(); err != nil {
		return *err
	}
	return queue.ErrDeleted
}

// awaitApplied waits, up to d, while this member leads but has not yet
// applied every entry committed before its election: until then its
// machine may lack them (after a whole cluster restarts, nothing is
// applied before the new leader's first commit, and the queue would
// count no messages). Followers and settled leaders return at once.
func (c *core) awaitApplied(d time.Duration) {
	deadline := time.Now().Add(d)
	for c.isLeader() && !c.leaderApplied.Load() && !c.stopped.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// queueConfig is the configuration the queue's machine runs with.
func (c *core) queueConfig() raftq.Config {
	c.fsm.mu.Lock()
	defer c.fsm.mu.Unlock()
	return c.fsm.m.Config()
}

// Name is the queue's name in logs ("vhost/name").
func (c *core) Name() string { return c.cfg.Name }

// IsLeader reports whether this member leads the group now.
func (c *core) IsLeader() bool { return c.isLeader() }

// Leader is the node name of the group's leader as this member knows it,
// "" while there is none.
func (c *core) Leader() string {
	ra := c.leaderOf.Load()
	if ra == nil {
		return ""
	}
	_, id := ra.LeaderWithID()
	return string(id)
}

// LastIndex is the index of the last entry in this member's log: cheap
// (no stats map), for watching whether a group is idle.
func (c *core) LastIndex() uint64 { return c.raft.LastIndex() }

// Touch renews the queue's x-expires lease: the broker calls it when the
// queue is redeclared (the TTL guide: redeclaring renews the lease). It
// returns once the renewal is committed.
func (c *core) Touch() error {
	return errorFor(c.wait(c.propose(&raftq.Command{Op: raftq.OpTouch})))
}

// expire asks the node to delete the queue: x-expires ran out.
func (c *core) expire() {
	if c.cfg.OnExpired != nil {
		go c.cfg.OnExpired()
	}
}
