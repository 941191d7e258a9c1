package node

import (
	"context"
	"fmt"

	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/cluster/queue"
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
