package node

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/raftq/replica"
)

// handOffTimeout is how long a node tries to hand off its leaderships
// before it stops (all of them) or while it drains (each one): a transfer
// whose target does not win takes an election timeout.
const handOffTimeout = 5 * time.Second

// handOff moves the leadership of every queue this node leads to another
// member before it stops, so that clients see a leader change at once
// instead of an election timeout later. It waits at most timeout; the
// groups that did not move elect a new leader when this node is gone.
func (c *clusterNode) handOff(timeout time.Duration) {
	leading := c.host.leading()
	if len(leading) == 0 || c.cfg.NoHandOffOnStop {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	var moved, failed atomic.Int64
	sem := make(chan struct{}, 16)
	for _, r := range leading {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				failed.Add(1)
				return
			}
			defer func() { <-sem }()
			switch err := c.handOffUndrained(ctx, r, true); {
			case errors.Is(err, replica.ErrNoTarget):
				// A group of one (a cluster of one), or one whose
				// other members' nodes are gone, has nobody to hand
				// to.
			case err != nil:
				failed.Add(1)
				c.log.Warn("queue leadership not handed off before stopping; its other members elect when this node is gone",
					"queue", r.Name(), "err", err)
			default:
				moved.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := moved.Load(); n > 0 {
		c.log.Info("handed off queue leadership before stopping", "queues", n)
	}
	if n := failed.Load(); n > 0 {
		c.log.Warn("not every queue's leadership moved before stopping", "queues", n)
	}
}

// canLead reports whether node may take a leadership this node hands
// off: gossip sees it alive and not leaving. Asking a node that is gone
// fails only after raft's election timeout (30 s for queue groups by
// default), longer than a stop waits.
func (c *clusterNode) canLead(node string) bool {
	m, ok := c.gossip.Member(node)
	return ok && m.State == membership.Alive && !m.Leaving
}

// handOffUndrained hands r's leadership to a member whose node may lead
// and is not drained: a drained node would only hand it on again, and two
// drained nodes would pass it back and forth. With orDrained, a drained
// node takes it when no other can (a stopping node: better a leader that
// moves on later than none until an election).
func (c *clusterNode) handOffUndrained(ctx context.Context, r *replica.Replica, orDrained bool) error {
	err := r.HandOff(ctx, func(node string) bool { return c.canLead(node) && !c.drained(node) })
	if errors.Is(err, replica.ErrNoTarget) && orDrained {
		err = r.HandOff(ctx, c.canLead)
	}
	return err
}
