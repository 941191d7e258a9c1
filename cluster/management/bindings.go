package management

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/proto/adminpb"
)

// propertiesKey names a binding among those between the same source and
// destination, as RabbitMQ's API does in paths: the routing key ("~" for
// an empty one) and, for a binding with arguments, "~" and a digest of
// them.
func propertiesKey(routingKey string, args map[string]any) string {
	key := routingKey
	if key == "" {
		key = "~"
	}
	if len(args) == 0 {
		return key
	}
	canonical, _ := json.Marshal(args) // map keys are sorted
	sum := sha256.Sum256(canonical)
	return routingKey + "~" + base64.RawURLEncoding.EncodeToString(sum[:9])
}

func bindingItem(b *adminpb.Binding) item {
	args := jsonObject(b.Arguments)
	return item{
		"source": b.Source, "vhost": b.Vhost, "destination": b.Destination,
		"destination_type": b.DestinationType, "routing_key": b.RoutingKey,
		"arguments": args, "properties_key": propertiesKey(b.RoutingKey, args),
	}
}

// bindingItems are the bindings of vhost ("" for all) c sees that keep
// returns true for.
func (s exchangeAPI) bindingItems(ctx context.Context, c *caller, vhost string, keep func(*adminpb.Binding) bool) ([]item, error) {
	resp, err := s.cfg.Admin.ListBindings(ctx, &adminpb.ListBindingsRequest{Vhost: vhost})
	if err != nil {
		return nil, adminError(err)
	}
	out := []item{}
	for _, b := range resp.Bindings {
		if s.seesVhost(c, b.Vhost) && (keep == nil || keep(b)) {
			out = append(out, bindingItem(b))
		}
	}
	return out, nil
}

func (s exchangeAPI) replyBindings(w http.ResponseWriter, r *http.Request, c *caller, vhost string, keep func(*adminpb.Binding) bool) error {
	if vhost != "" {
		if err := s.requireVhost(r.Context(), c, vhost); err != nil {
			return err
		}
	}
	items, err := s.bindingItems(r.Context(), c, vhost, keep)
	if err != nil {
		return err
	}
	replyList(w, r, items, "vhost", "source", "destination", "routing_key")
	return nil
}

func (s exchangeAPI) listBindings(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.replyBindings(w, r, c, r.PathValue("vhost"), nil)
}

func (s exchangeAPI) listExchangeBindings(side string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		e, err := s.findExchange(r, c)
		if err != nil {
			return err
		}
		return s.replyBindings(w, r, c, e.Vhost, func(b *adminpb.Binding) bool {
			if side == "source" {
				return b.Source == e.Name
			}
			return b.DestinationType == "exchange" && b.Destination == e.Name
		})
	}
}

func (s exchangeAPI) listQueueBindings(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.requireQueue(r, c); err != nil {
		return err
	}
	name := r.PathValue("name")
	return s.replyBindings(w, r, c, r.PathValue("vhost"), func(b *adminpb.Binding) bool {
		return b.DestinationType == "queue" && b.Destination == name
	})
}

// bindingEnds reads a binding path: source, destination type ("q" or
// "e") and destination, the default exchange by its path name.
func bindingEnds(r *http.Request) (source, destType, dest string, err error) {
	switch r.PathValue("dtype") {
	case "q":
		destType = "queue"
	case "e":
		destType = "exchange"
	default:
		return "", "", "", notFound()
	}
	return exchangeName(r.PathValue("source")), destType, r.PathValue("destination"), nil
}

// between keeps the bindings from source to the destination named.
func between(source, destType, dest string) func(*adminpb.Binding) bool {
	return func(b *adminpb.Binding) bool {
		return b.Source == source && b.DestinationType == destType && b.Destination == dest
	}
}

func (s exchangeAPI) listBindingsBetween(w http.ResponseWriter, r *http.Request, c *caller) error {
	source, destType, dest, err := bindingEnds(r)
	if err != nil {
		return err
	}
	return s.replyBindings(w, r, c, r.PathValue("vhost"), between(source, destType, dest))
}

func (s exchangeAPI) findBinding(r *http.Request, c *caller) (item, error) {
	source, destType, dest, err := bindingEnds(r)
	if err != nil {
		return nil, err
	}
	vhost := r.PathValue("vhost")
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return nil, err
	}
	items, err := s.bindingItems(r.Context(), c, vhost, between(source, destType, dest))
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if it["properties_key"] == r.PathValue("props") {
			return it, nil
		}
	}
	return nil, notFound()
}

func (s exchangeAPI) getBinding(w http.ResponseWriter, r *http.Request, c *caller) error {
	it, err := s.findBinding(r, c)
	if err != nil {
		return err
	}
	replyItem(w, r, it)
	return nil
}

// postBinding binds as queue.bind or exchange.bind would, as the caller,
// and answers 201 with the new binding's path in Location.
func (s exchangeAPI) postBinding(w http.ResponseWriter, r *http.Request, c *caller) error {
	source, destType, dest, err := bindingEnds(r)
	if err != nil {
		return err
	}
	var b body
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	key, err := b.str("routing_key", "")
	if err != nil {
		return err
	}
	args, err := b.object("arguments")
	if err != nil {
		return err
	}
	vhost := r.PathValue("vhost")
	if err := s.requireVhost(r.Context(), c, vhost); err != nil {
		return err
	}
	if source == "" {
		return notAuthorised("operation not permitted on the default exchange")
	}
	err = s.withChannel(r.Context(), c, vhost, func(ch *amqp091.Channel) error {
		if destType == "queue" {
			return ch.QueueBind(dest, key, source, false, table(args))
		}
		return ch.ExchangeBind(dest, key, source, false, table(args))
	})
	if err != nil {
		return err
	}
	w.Header().Set("Location", url.PathEscape(propertiesKey(key, args)))
	w.WriteHeader(http.StatusCreated)
	return nil
}

func (s exchangeAPI) deleteBinding(w http.ResponseWriter, r *http.Request, c *caller) error {
	it, err := s.findBinding(r, c)
	if err != nil {
		return err
	}
	source, destType, dest, _ := bindingEnds(r)
	key, _ := it["routing_key"].(string)
	args, _ := it["arguments"].(map[string]any)
	if source == "" {
		return notAuthorised("operation not permitted on the default exchange")
	}
	err = s.withChannel(r.Context(), c, r.PathValue("vhost"), func(ch *amqp091.Channel) error {
		if destType == "queue" {
			return ch.QueueUnbind(dest, key, source, table(args))
		}
		return ch.ExchangeUnbind(dest, key, source, false, table(args))
	})
	if err != nil {
		return err
	}
	noContent(w)
	return nil
}
