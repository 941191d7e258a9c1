package management

import (
	"context"
	"encoding/base64"
	"net/http"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

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
		closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
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
		// A refused publish (no write permission, an internal
		// exchange) closes the channel; its confirm is then a nack.
		select {
		case e := <-closed:
			if e != nil {
				return e
			}
		default:
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
