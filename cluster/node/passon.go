package node

import (
	"context"
	"time"
)

// passOnTimeout bounds how long a stopping node waits, for all its queues
// together, for the settlements its routers still send to the queues'
// leaders (forward.Router.CloseWithin): acks, nacks and rejects its
// members were given while they handed their leaderships off, or just
// after. Each is a client's settlement the broker accepted; the wait ends
// as soon as the leaders took them all.
const passOnTimeout = 5 * time.Second

// closeQueuesWithin gives the queues this node closes from now on until
// timeout, together, to pass on what they still send to their leaders; the
// returned func ends that window.
func (c *clusterNode) closeQueuesWithin(timeout time.Duration) func() {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	c.closing.Store(&ctx)
	return cancel
}

// closeRouter closes q's router, within the stopping node's window if
// there is one (closeQueuesWithin).
func (c *clusterNode) closeRouter(q *clusterQueue) {
	if ctx := c.closing.Load(); ctx != nil {
		q.Router.CloseWithin(*ctx)
		return
	}
	q.Router.Close()
}
