package node

import (
	"context"
	"fmt"

	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/raftq/queue"
)

// RelayReply hands a direct reply-to reply to the requester's node
// (server.ReplyRelay): the reply consumer lives on the node its
// connection is on, whichever node the responder publishes through.
func (c *clusterNode) RelayReply(ctx context.Context, node, name string, m *queue.Message) (bool, error) {
	addr, ok := c.addrOf(node)
	if !ok {
		return false, fmt.Errorf("no address for node %q", node)
	}
	return forward.RelayReply(ctx, c.pool, addr, name, m)
}

// Running reports whether gossip sees node up (server.ReplyRelay): a
// direct reply-to name of a running node routes, as in RabbitMQ 4.3.
func (c *clusterNode) Running(node string) bool {
	if node == c.self {
		return true
	}
	m, ok := c.gossip.Member(node)
	return ok && (m.State == membership.Alive || m.State == membership.Suspect) && !m.Leaving
}
