package admin

import (
	"context"

	"github.com/warrenmq/warren/proto/adminpb"
)

// NodeStatusOn is node's own status (NodeStatus as that node answers
// it), asked in-process when node is this one: for front ends that show
// every node's figures, as the management API's /api/nodes does.
func (s *Server) NodeStatusOn(ctx context.Context, node string) (*adminpb.NodeStatusResponse, error) {
	return onNode(ctx, s, node, &adminpb.NodeStatusRequest{}, (*Server).NodeStatus, adminpb.AdminClient.NodeStatus)
}
