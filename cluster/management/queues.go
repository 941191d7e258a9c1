package management

import (
	"context"
	"encoding/json"
	"net/http"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/proto/adminpb"
)

// visibleQueues are the queues of vhost ("" for all) c sees, with their
// counts (the admin service asks each queue's leader).
func (s *Server) visibleQueues(ctx context.Context, c *caller, vhost string) ([]*adminpb.Queue, error) {
	resp, err := s.cfg.Admin.ListQueues(ctx, &adminpb.ListQueuesRequest{Vhost: vhost})
	if err != nil {
		return nil, adminError(err)
	}
	var out []*adminpb.Queue
	for _, q := range resp.Queues {
		if s.seesVhost(c, q.Vhost) {
			out = append(out, q)
		}
	}
	return out, nil
}

// queueDecl is what a queue was declared with, from the definitions.
type queueDecl struct {
	Vhost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

// queueDecls are the durable queues' declarations by vhost and name.
func (s *Server) queueDecls(ctx context.Context) map[[2]string]queueDecl {
	out := map[[2]string]queueDecl{}
	doc, err := s.cfg.Admin.ExportDefinitions(ctx, &adminpb.ExportDefinitionsRequest{})
	if err != nil {
		s.log.Debug("queue declarations unavailable", "err", err)
		return out
	}
	var defs struct {
		Queues []queueDecl `json:"queues"`
	}
	if json.Unmarshal(doc.Json, &defs) == nil {
		for _, q := range defs.Queues {
			out[[2]string{q.Vhost, q.Name}] = q
		}
	}
	return out
}

// queueItem is a queue with RabbitMQ's fields; a quorum queue's leader
// is its node, as RabbitMQ shows it.
func queueItem(q *adminpb.Queue, decl queueDecl, known bool) item {
	members, online := q.Members, q.OnlineMembers
	if members == nil {
		members = []string{}
	}
	if online == nil {
		online = []string{}
	}
	args := decl.Arguments
	if args == nil {
		args = map[string]any{}
	}
	state := "running"
	if q.Type == "quorum" && q.Leader == "" {
		state = "minority"
	}
	it := item{
		"name": q.Name, "vhost": q.Vhost, "type": q.Type, "node": q.Leader,
		"durable": decl.Durable || !known, "auto_delete": decl.AutoDelete, "exclusive": false,
		"arguments": args, "state": state,
		"messages": q.Messages, "messages_ready": q.Ready, "messages_unacknowledged": q.Unacked,
		"consumers": q.Consumers, "messages_dlx": q.DeadLettered, "messages_delayed": q.Delayed,
	}
	if q.Type == "quorum" {
		it["leader"] = q.Leader
		it["members"] = members
		it["online"] = online
	}
	return it
}

func (s *Server) queueItems(ctx context.Context, c *caller, vhost string) ([]item, error) {
	qs, err := s.visibleQueues(ctx, c, vhost)
	if err != nil {
		return nil, err
	}
	decls := s.queueDecls(ctx)
	items := make([]item, len(qs))
	for i, q := range qs {
		d, ok := decls[[2]string{q.Vhost, q.Name}]
		items[i] = queueItem(q, d, ok)
	}
	return items, nil
}

func (s queueAPI) listQueues(w http.ResponseWriter, r *http.Request, c *caller) error {
	vhost := r.PathValue("vhost")
	if vhost != "" {
		if err := s.requireVhost(r.Context(), c, vhost); err != nil {
			return err
		}
	}
	items, err := s.queueItems(r.Context(), c, vhost)
	if err != nil {
		return err
	}
	replyList(w, r, items, "vhost", "name")
	return nil
}

// findQueue is the queue a path names, or 404.
func (s *Server) findQueue(r *http.Request, c *caller) (item, error) {
	vhost, name := r.PathValue("vhost"), r.PathValue("name")
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return nil, err
	}
	items, err := s.queueItems(r.Context(), c, vhost)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if it["name"] == name {
			return it, nil
		}
	}
	return nil, notFound()
}

func (s queueAPI) getQueue(w http.ResponseWriter, r *http.Request, c *caller) error {
	it, err := s.findQueue(r, c)
	if err != nil {
		return err
	}
	replyItem(w, r, it)
	return nil
}

// putQueue declares a queue as queue.declare would, as the caller.
// "node" (where RabbitMQ places a classic queue) is not used: Warren
// places a quorum queue's members and leader itself.
func (s queueAPI) putQueue(w http.ResponseWriter, r *http.Request, c *caller) error {
	var b body
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	durable, err := b.boolean("durable", true)
	if err != nil {
		return err
	}
	autoDelete, err := b.boolean("auto_delete", false)
	if err != nil {
		return err
	}
	args, err := b.object("arguments")
	if err != nil {
		return err
	}
	if _, err := b.str("node", ""); err != nil {
		return err
	}
	vhost, name := r.PathValue("vhost"), r.PathValue("name")
	if name == "" {
		return badRequest("a queue name is required")
	}
	isNew := s.requireQueue(r, c) != nil
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return err
	}
	err = s.withChannel(r.Context(), c, vhost, func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare(name, durable, autoDelete, false, false, table(args))
		return err
	})
	if err != nil {
		return err
	}
	created(w, isNew)
	return nil
}

func (s queueAPI) deleteQueue(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.requireQueue(r, c); err != nil {
		return err
	}
	q := r.URL.Query()
	ifUnused, ifEmpty := q.Get("if-unused") == "true", q.Get("if-empty") == "true"
	err := s.withChannel(r.Context(), c, r.PathValue("vhost"), func(ch *amqp091.Channel) error {
		_, err := ch.QueueDelete(r.PathValue("name"), ifUnused, ifEmpty, false)
		return err
	})
	if err != nil {
		return err
	}
	noContent(w)
	return nil
}

func (s queueAPI) purgeQueue(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.requireQueue(r, c); err != nil {
		return err
	}
	err := s.withChannel(r.Context(), c, r.PathValue("vhost"), func(ch *amqp091.Channel) error {
		_, err := ch.QueuePurge(r.PathValue("name"), false)
		return err
	})
	if err != nil {
		return err
	}
	noContent(w)
	return nil
}

// requireQueue answers 404 unless the queue a path names exists, without
// asking its leader for counts: every queue, durable or not, has its
// binding from the default exchange, which this node's copy of the
// definitions lists.
func (s *Server) requireQueue(r *http.Request, c *caller) error {
	vhost, name := r.PathValue("vhost"), r.PathValue("name")
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return err
	}
	resp, err := s.cfg.Admin.ListBindings(r.Context(), &adminpb.ListBindingsRequest{Vhost: vhost})
	if err != nil {
		return adminError(err)
	}
	for _, b := range resp.Bindings {
		if b.Source == "" && b.DestinationType == "queue" && b.Destination == name {
			return nil
		}
	}
	return notFound()
}
