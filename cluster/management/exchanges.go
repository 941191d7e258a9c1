package management

import (
	"context"
	"net/http"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/proto/adminpb"
)

// defaultExchangePath is how RabbitMQ's API names the default exchange
// (whose name is empty) in a path.
const defaultExchangePath = "amq.default"

func exchangeName(pathName string) string {
	if pathName == defaultExchangePath {
		return ""
	}
	return pathName
}

// visibleExchanges are the exchanges of vhost ("" for all) c sees.
func (s *Server) visibleExchanges(ctx context.Context, c *caller, vhost string) ([]*adminpb.Exchange, error) {
	resp, err := s.cfg.Admin.ListExchanges(ctx, &adminpb.ListExchangesRequest{Vhost: vhost})
	if err != nil {
		return nil, adminError(err)
	}
	var out []*adminpb.Exchange
	for _, e := range resp.Exchanges {
		if s.seesVhost(c, e.Vhost) {
			out = append(out, e)
		}
	}
	return out, nil
}

func exchangeItem(e *adminpb.Exchange) item {
	return item{
		"name": e.Name, "vhost": e.Vhost, "type": e.Type, "durable": e.Durable,
		"auto_delete": e.AutoDelete, "internal": e.Internal, "arguments": jsonObject(e.Arguments),
		"user_who_performed_action": "rmq-internal",
	}
}

func (s exchangeAPI) listExchanges(w http.ResponseWriter, r *http.Request, c *caller) error {
	vhost := r.PathValue("vhost")
	if vhost != "" {
		if err := s.requireVhost(r.Context(), c, vhost); err != nil {
			return err
		}
	}
	es, err := s.visibleExchanges(r.Context(), c, vhost)
	if err != nil {
		return err
	}
	items := make([]item, len(es))
	for i, e := range es {
		items[i] = exchangeItem(e)
	}
	replyList(w, r, items, "vhost", "name")
	return nil
}

// findExchange is the exchange a path names, or 404.
func (s exchangeAPI) findExchange(r *http.Request, c *caller) (*adminpb.Exchange, error) {
	vhost, name := r.PathValue("vhost"), exchangeName(r.PathValue("name"))
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return nil, err
	}
	es, err := s.visibleExchanges(r.Context(), c, vhost)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		if e.Name == name {
			return e, nil
		}
	}
	return nil, notFound()
}

func (s exchangeAPI) getExchange(w http.ResponseWriter, r *http.Request, c *caller) error {
	e, err := s.findExchange(r, c)
	if err != nil {
		return err
	}
	replyItem(w, r, exchangeItem(e))
	return nil
}

func (s exchangeAPI) putExchange(w http.ResponseWriter, r *http.Request, c *caller) error {
	var b body
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	kind, err := b.str("type", "")
	if err != nil {
		return err
	}
	if kind == "" {
		return badRequest("type is required")
	}
	durable, err := b.boolean("durable", true)
	if err != nil {
		return err
	}
	autoDelete, err := b.boolean("auto_delete", false)
	if err != nil {
		return err
	}
	internal, err := b.boolean("internal", false)
	if err != nil {
		return err
	}
	args, err := b.object("arguments")
	if err != nil {
		return err
	}
	vhost, name := r.PathValue("vhost"), r.PathValue("name")
	if name == defaultExchangePath || name == "" {
		return notAuthorised("the default exchange cannot be declared")
	}
	_, err = s.findExchange(r, c)
	isNew := err != nil
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return err
	}
	err = s.withChannel(r.Context(), c, vhost, func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare(name, kind, durable, autoDelete, internal, false, table(args))
	})
	if err != nil {
		return err
	}
	created(w, isNew)
	return nil
}

func (s exchangeAPI) deleteExchange(w http.ResponseWriter, r *http.Request, c *caller) error {
	e, err := s.findExchange(r, c)
	if err != nil {
		return err
	}
	ifUnused := r.URL.Query().Get("if-unused") == "true"
	err = s.withChannel(r.Context(), c, e.Vhost, func(ch *amqp091.Channel) error {
		return ch.ExchangeDelete(e.Name, ifUnused, false)
	})
	if err != nil {
		return err
	}
	noContent(w)
	return nil
}
