package management

import (
	"context"
	"encoding/base64"
	"net/http"
	"time"

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

// publishWait bounds how long a publish waits for the broker's confirm.
const publishWait = 30 * time.Second

// publish sends one message as RabbitMQ's API does: mandatory, so that
// the answer says whether any queue took it ({"routed": bool}).
func (s exchangeAPI) publish(w http.ResponseWriter, r *http.Request, c *caller) error {
	var b body
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	msg, key, err := publishing(b)
	if err != nil {
		return err
	}
	e, err := s.findExchange(r, c)
	if err != nil {
		return err
	}
	routed := false
	err = s.withChannel(r.Context(), c, e.Vhost, func(ch *amqp091.Channel) error {
		returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
		if err := ch.Confirm(false); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(r.Context(), publishWait)
		defer cancel()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, e.Name, key, true, false, msg)
		if err != nil {
			return err
		}
		acked, err := dc.WaitContext(ctx)
		if err != nil {
			return unavailable("no confirm from the broker: %v", err)
		}
		// The broker sends a basic.return before its publish's
		// confirm, and the client hands it over before the confirm.
		select {
		case <-returns:
		default:
			routed = acked
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, item{"routed": routed})
	return nil
}

// publishing reads a publish request: routing_key, payload,
// payload_encoding (string or base64) and properties.
func publishing(b body) (amqp091.Publishing, string, error) {
	var msg amqp091.Publishing
	key, err := b.str("routing_key", "")
	if err != nil {
		return msg, "", err
	}
	if !b.has("routing_key") {
		return msg, "", badRequest("routing_key is required")
	}
	payload, err := b.str("payload", "")
	if err != nil {
		return msg, "", err
	}
	enc, err := b.str("payload_encoding", "string")
	if err != nil {
		return msg, "", err
	}
	switch enc {
	case "string":
		msg.Body = []byte(payload)
	case "base64":
		if msg.Body, err = base64.StdEncoding.DecodeString(payload); err != nil {
			return msg, "", badRequest("payload is not base64: %v", err)
		}
	default:
		return msg, "", badRequest("payload_encoding must be string or base64, not %q", enc)
	}
	props, err := b.object("properties")
	if err != nil {
		return msg, "", err
	}
	return msg, key, setProperties(&msg, body(props))
}

func setProperties(msg *amqp091.Publishing, p body) error {
	strs := map[string]*string{
		"content_type": &msg.ContentType, "content_encoding": &msg.ContentEncoding,
		"correlation_id": &msg.CorrelationId, "reply_to": &msg.ReplyTo, "expiration": &msg.Expiration,
		"message_id": &msg.MessageId, "type": &msg.Type, "user_id": &msg.UserId, "app_id": &msg.AppId,
	}
	for k, dst := range strs {
		v, err := p.str(k, "")
		if err != nil {
			return err
		}
		*dst = v
	}
	mode, err := p.integer("delivery_mode", 0)
	if err != nil {
		return err
	}
	if mode < 0 || mode > 2 {
		return badRequest("delivery_mode must be 1 or 2")
	}
	msg.DeliveryMode = uint8(mode)
	prio, err := p.integer("priority", 0)
	if err != nil {
		return err
	}
	if prio < 0 || prio > 255 {
		return badRequest("priority must be between 0 and 255")
	}
	msg.Priority = uint8(prio)
	ts, err := p.integer("timestamp", 0)
	if err != nil {
		return err
	}
	if ts != 0 {
		msg.Timestamp = time.Unix(ts, 0)
	}
	if p.has("headers") {
		h, err := p.object("headers")
		if err != nil {
			return err
		}
		msg.Headers = table(h)
	}
	return nil
}
