package admin

import (
	"context"

	"google.golang.org/grpc/codes"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/proto/adminpb"
)

// A vhost's exchanges, bindings and queues from outside any connection:
// the answering node's model, and queue operations through it (a quorum
// queue's through its leader, as a client's).

// EntitiesBackend is what a Backend offers for exchanges, bindings and
// queue operations. A Backend without it answers Unimplemented.
type EntitiesBackend interface {
	Exchanges(vhost string) []broker.ExchangeInfo
	Bindings(vhost string) []broker.BindingInfo
	// DeleteQueue and PurgeQueue return the messages deleted or purged;
	// their error wraps ErrNotFound for a missing vhost or queue, and
	// ErrRefused for what queue.delete's flags refuse.
	DeleteQueue(vhost, name string, ifUnused, ifEmpty bool) (uint32, error)
	PurgeQueue(vhost, name string) (uint32, error)
}

func (s *Server) entities() (EntitiesBackend, error) {
	return optional[EntitiesBackend](s, "exchanges, bindings and queue operations are")
}

// ListExchanges implements adminpb.AdminServer.
func (s *Server) ListExchanges(_ context.Context, req *adminpb.ListExchangesRequest) (*adminpb.ListExchangesResponse, error) {
	eb, err := s.entities()
	if err != nil {
		return nil, err
	}
	resp := &adminpb.ListExchangesResponse{}
	for _, x := range eb.Exchanges(req.Vhost) {
		resp.Exchanges = append(resp.Exchanges, &adminpb.Exchange{Vhost: x.Vhost, Name: x.Name, Type: x.Type,
			Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Arguments: tableJSON(x.Arguments)})
	}
	return resp, nil
}

// ListBindings implements adminpb.AdminServer.
func (s *Server) ListBindings(_ context.Context, req *adminpb.ListBindingsRequest) (*adminpb.ListBindingsResponse, error) {
	eb, err := s.entities()
	if err != nil {
		return nil, err
	}
	resp := &adminpb.ListBindingsResponse{}
	for _, b := range eb.Bindings(req.Vhost) {
		kind := "queue"
		if b.ToExchange {
			kind = "exchange"
		}
		resp.Bindings = append(resp.Bindings, &adminpb.Binding{Vhost: b.Vhost, Source: b.Source, Destination: b.Destination,
			DestinationType: kind, RoutingKey: b.RoutingKey, Arguments: tableJSON(b.Arguments)})
	}
	return resp, nil
}

// DeleteQueue implements adminpb.AdminServer.
func (s *Server) DeleteQueue(_ context.Context, req *adminpb.DeleteQueueRequest) (*adminpb.QueueMessagesResponse, error) {
	eb, err := s.entities()
	if err != nil {
		return nil, err
	}
	n, err := eb.DeleteQueue(req.Vhost, req.Name, req.IfUnused, req.IfEmpty)
	return queueMessages(n, err)
}

// PurgeQueue implements adminpb.AdminServer.
func (s *Server) PurgeQueue(_ context.Context, req *adminpb.PurgeQueueRequest) (*adminpb.QueueMessagesResponse, error) {
	eb, err := s.entities()
	if err != nil {
		return nil, err
	}
	n, err := eb.PurgeQueue(req.Vhost, req.Name)
	return queueMessages(n, err)
}

func queueMessages(n uint32, err error) (*adminpb.QueueMessagesResponse, error) {
	if err != nil {
		return nil, statusOf(err, codes.Unavailable)
	}
	return &adminpb.QueueMessagesResponse{Messages: n}, nil
}
