package admin

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/proto/adminpb"
)

// Closing client connections by hand, as rabbitmqctl close_connection,
// close_all_connections and close_all_user_connections do: each node
// closes its own, so the asked node asks every alive node (or the one
// named), one after another while a limit remains.

// ConnectionCloser is what a Backend offers for closing its node's client
// connections. A Backend without it answers Unimplemented.
type ConnectionCloser interface {
	// CloseConnections closes the node's connections that f selects with
	// 320 CONNECTION_FORCED and reason, and returns them.
	CloseConnections(f server.ConnectionFilter, reason string) []server.ClosedConnection
}

// CloseConnections implements adminpb.AdminServer.
func (s *Server) CloseConnections(ctx context.Context, req *adminpb.CloseConnectionsRequest) (*adminpb.CloseConnectionsResponse, error) {
	if _, err := optional[ConnectionCloser](s, "closing connections is"); err != nil {
		return nil, err
	}
	if req.Reason == "" {
		return nil, status.Error(codes.InvalidArgument, "a reason is needed: the clients are told it")
	}
	alive := s.alive()
	nodes := slices.Sorted(maps.Keys(alive))
	if req.Node != "" {
		if !alive[req.Node] {
			return nil, status.Errorf(codes.NotFound, "node '%s' is not an alive cluster member", req.Node)
		}
		nodes = []string{req.Node}
	}
	resp := &adminpb.CloseConnectionsResponse{}
	for _, node := range nodes {
		local := &adminpb.CloseConnectionsRequest{Name: req.Name, User: req.User, Vhost: req.Vhost, Limit: req.Limit, Reason: req.Reason}
		if req.Limit > 0 {
			local.Limit = req.Limit - uint32(len(resp.Closed))
			if local.Limit == 0 {
				break
			}
		}
		closed, err := s.askClose(ctx, node, local)
		if err != nil {
			s.log.Debug("close connections: node unreachable", "node", node, "err", err)
			resp.Unreachable = append(resp.Unreachable, &adminpb.NodeError{Node: node, Error: err.Error()})
			continue
		}
		resp.Closed = append(resp.Closed, closed...)
	}
	slices.SortStableFunc(resp.Closed, func(a, b *adminpb.ClosedConnection) int { return cmp.Compare(a.Node, b.Node) })
	return resp, nil
}

func (s *Server) askClose(ctx context.Context, node string, req *adminpb.CloseConnectionsRequest) ([]*adminpb.ClosedConnection, error) {
	resp, err := onNode(ctx, s, node, req, (*Server).LocalCloseConnections, adminpb.AdminClient.LocalCloseConnections)
	if err != nil {
		return nil, errors.New(status.Convert(err).Message())
	}
	return resp.Closed, nil
}

// LocalCloseConnections implements adminpb.AdminServer.
func (s *Server) LocalCloseConnections(_ context.Context, req *adminpb.CloseConnectionsRequest) (*adminpb.CloseConnectionsResponse, error) {
	cc, err := optional[ConnectionCloser](s, "closing connections is")
	if err != nil {
		return nil, err
	}
	f := server.ConnectionFilter{Name: req.Name, User: req.User, Vhost: req.Vhost, Limit: int(req.Limit)}
	resp := &adminpb.CloseConnectionsResponse{}
	for _, c := range cc.CloseConnections(f, req.Reason) {
		resp.Closed = append(resp.Closed, &adminpb.ClosedConnection{Node: s.b.Self(), Name: c.Name, User: c.User, Vhost: c.Vhost})
	}
	return resp, nil
}
