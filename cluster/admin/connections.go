package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/proto/adminpb"
)

// Client connections: each node knows only its own, so ListConnections
// asks every alive node (LocalConnections) and puts the answers together,
// as rabbitmqctl's list_connections does across a RabbitMQ cluster.

// ConnectionsBackend is what a Backend offers for listing client
// connections. A Backend without it answers Unimplemented.
type ConnectionsBackend interface {
	// Connections is this node's client connections with their channels
	// and consumers.
	Connections() []server.ConnectionInfo
}

// ListConnections implements adminpb.AdminServer.
func (s *Server) ListConnections(ctx context.Context, req *adminpb.ListConnectionsRequest) (*adminpb.ListConnectionsResponse, error) {
	if _, ok := s.b.(ConnectionsBackend); !ok {
		return nil, status.Error(codes.Unimplemented, "listing connections is not available on this node")
	}
	var (
		mu   sync.Mutex
		resp = &adminpb.ListConnectionsResponse{}
		wg   sync.WaitGroup
	)
	for node := range s.alive() {
		wg.Go(func() {
			conns, err := s.askConnections(ctx, node, req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.log.Debug("list connections: node unreachable", "node", node, "err", err)
				resp.Unreachable = append(resp.Unreachable, &adminpb.NodeError{Node: node, Error: err.Error()})
				return
			}
			resp.Connections = append(resp.Connections, conns...)
		})
	}
	wg.Wait()
	// Each node's own are oldest first already; a stable sort keeps that.
	slices.SortStableFunc(resp.Connections, func(a, b *adminpb.Connection) int { return cmp.Compare(a.Node, b.Node) })
	slices.SortFunc(resp.Unreachable, func(a, b *adminpb.NodeError) int { return cmp.Compare(a.Node, b.Node) })
	return resp, nil
}

// CountClients is how many client connections to vhost, or of user, and
// channels on them, every alive node reports, for vhost and user limits
// (broker/limits.go), as RabbitMQ's connection and channel tracking count
// them across the cluster. A node that does not answer within its wait
// counts none.
func (s *Server) CountClients(ctx context.Context, vhost, user string) server.ClientCount {
	var n server.ClientCount
	resp, err := s.ListConnections(ctx, &adminpb.ListConnectionsRequest{Vhost: vhost, User: user})
	if err != nil {
		return n
	}
	for _, c := range resp.Connections {
		n.Connections++
		n.Channels += len(c.Channels)
	}
	return n
}

// askConnections is node's answer to LocalConnections.
func (s *Server) askConnections(ctx context.Context, node string, req *adminpb.ListConnectionsRequest) ([]*adminpb.Connection, error) {
	resp, err := onNode(ctx, s, node, req, (*Server).LocalConnections, adminpb.AdminClient.LocalConnections)
	if err != nil {
		return nil, errors.New(status.Convert(err).Message())
	}
	return resp.Connections, nil
}

// LocalConnections implements adminpb.AdminServer.
func (s *Server) LocalConnections(_ context.Context, req *adminpb.ListConnectionsRequest) (*adminpb.ListConnectionsResponse, error) {
	cb, ok := s.b.(ConnectionsBackend)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "listing connections is not available on this node")
	}
	resp := &adminpb.ListConnectionsResponse{}
	for _, c := range cb.Connections() {
		if (req.Vhost == "" || c.Vhost == req.Vhost) && (req.User == "" || c.User == req.User) {
			resp.Connections = append(resp.Connections, connectionPB(s.b.Self(), c))
		}
	}
	return resp, nil
}

func connectionPB(node string, c server.ConnectionInfo) *adminpb.Connection {
	pb := &adminpb.Connection{
		Node:              node,
		Name:              c.Name,
		User:              c.User,
		Vhost:             c.Vhost,
		ClientName:        c.ClientName,
		ClientProduct:     c.ClientProduct,
		ClientVersion:     c.ClientVersion,
		ClientPlatform:    c.ClientPlatform,
		ConnectedAtUnixMs: c.ConnectedAt.UnixMilli(),
		FrameMax:          c.FrameMax,
		ChannelMax:        uint32(c.ChannelMax),
		HeartbeatSeconds:  uint32(c.Heartbeat.Seconds()),
		Blocked:           c.Blocked,
		RecvBytes:         c.RecvBytes,
		SentBytes:         c.SentBytes,
	}
	for _, ch := range c.Channels {
		chPB := &adminpb.Channel{
			Number:              uint32(ch.Number),
			Confirm:             ch.Confirm,
			Transactional:       ch.Transactional,
			PrefetchCount:       ch.Prefetch,
			GlobalPrefetchCount: ch.GlobalPrefetch,
			Unacked:             uint32(ch.Unacked),
			Unconfirmed:         uint32(ch.Unconfirmed),
		}
		for _, k := range ch.Consumers {
			chPB.Consumers = append(chPB.Consumers, &adminpb.Consumer{
				Queue:         k.Queue,
				Tag:           k.Tag,
				AckRequired:   k.AckRequired,
				Exclusive:     k.Exclusive,
				PrefetchCount: k.Prefetch,
				Priority:      k.Priority,
				Arguments:     tableJSON(k.Arguments),
			})
		}
		pb.Channels = append(pb.Channels, chPB)
	}
	return pb
}

// tableJSON is t as a JSON object ("" for none). Every AMQP field value
// marshals (byte arrays as base64, decimals as objects); should one not,
// the Go rendering says what it was.
func tableJSON(t wire.Table) string {
	if len(t) == 0 {
		return ""
	}
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Sprint(t)
	}
	return string(b)
}
