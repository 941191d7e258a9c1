package forward

import (
	"context"
	"fmt"

	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq/queue"
)

// Direct reply-to across nodes. A requester's reply consumer lives on the
// node its connection is on, and the name it hands out
// (amq.rabbitmq.reply-to.TOKEN) says which node that is; a responder
// connected elsewhere publishes the reply on its own node, which passes
// it here to the requester's node, as RabbitMQ's channels send a reply
// to the requester's channel process wherever it runs.

// Replies is the node's side of direct reply-to: it hands a reply to the
// reply consumer name names, or with m nil only says whether it lives;
// false if there is none (the requester has gone).
type Replies func(name string, m *queue.Message) bool

// SetReplies sets where Reply calls go (the AMQP server's reply
// consumers); until it is set, every name is unknown.
func (s *Server) SetReplies(fn Replies) { s.replies.Store(&fn) }

// Reply hands a reply to this node's reply consumer.
func (s *Server) Reply(_ context.Context, req *queuepb.ReplyRequest) (*queuepb.ReplyReply, error) {
	fn := s.replies.Load()
	if fn == nil {
		return &queuepb.ReplyReply{}, nil
	}
	var m *queue.Message
	if req.Message != nil {
		var err error
		if m, err = decodeMessage(req.Message); err != nil {
			return nil, err
		}
	}
	return &queuepb.ReplyReply{Found: (*fn)(req.Name, m)}, nil
}

// RelayReply sends a reply (or, with m nil, the question whether its
// consumer lives) to the node at addr, and reports whether the reply
// consumer name names lives there and took it.
func RelayReply(ctx context.Context, pool *rpc.Pool, addr, name string, m *queue.Message) (bool, error) {
	req := &queuepb.ReplyRequest{Name: name}
	if m != nil {
		pm, err := encodeMessage(m)
		if err != nil {
			return false, err
		}
		req.Message = pm
	}
	conn, err := pool.Conn(addr)
	if err != nil {
		return false, fmt.Errorf("forward: reach %s for a reply: %w", addr, err)
	}
	rep, err := queuepb.NewForwardClient(conn).Reply(ctx, req)
	if err != nil {
		return false, fmt.Errorf("forward: reply through %s: %w", addr, err)
	}
	return rep.Found, nil
}
