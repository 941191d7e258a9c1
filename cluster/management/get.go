package management

import (
	"encoding/base64"
	"net/http"
	"unicode/utf8"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// maxGet bounds the messages one POST .../get takes.
const maxGet = 1000

// getMessages takes up to count messages with basic.get, as the caller,
// and settles them as ackmode says: ack_requeue_false acknowledges
// them, ack_requeue_true and reject_requeue_true return them to the
// queue (redelivered), reject_requeue_false rejects them (dead-lettered
// where the queue says so).
func (s queueAPI) getMessages(w http.ResponseWriter, r *http.Request, c *caller) error {
	var b body
	if err := decodeBody(r, &b); err != nil {
		return err
	}
	count, err := b.integer("count", 1)
	if err != nil {
		return err
	}
	if count < 1 || count > maxGet {
		return badRequest("count must be between 1 and %d", maxGet)
	}
	ackmode, err := b.str("ackmode", "")
	if err != nil {
		return err
	}
	var requeue, ack bool
	switch ackmode {
	case "ack_requeue_true", "reject_requeue_true":
		requeue = true
	case "ack_requeue_false":
		ack = true
	case "reject_requeue_false":
	default:
		return badRequest("ackmode must be ack_requeue_true, ack_requeue_false, reject_requeue_true or reject_requeue_false")
	}
	encoding, err := b.str("encoding", "auto")
	if err != nil {
		return err
	}
	if encoding != "auto" && encoding != "base64" {
		return badRequest("encoding must be auto or base64")
	}
	truncate, err := b.integer("truncate", -1)
	if err != nil {
		return err
	}
	if err := s.requireQueue(r, c); err != nil {
		return err
	}
	out := []item{}
	err = s.withChannel(r.Context(), c, r.PathValue("vhost"), func(ch *amqp091.Channel) error {
		var last uint64
		for range count {
			d, ok, err := ch.Get(r.PathValue("name"), false)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			last = d.DeliveryTag
			out = append(out, gotItem(d, encoding, truncate))
		}
		if last == 0 {
			return nil
		}
		if ack {
			return ch.Ack(last, true)
		}
		return ch.Nack(last, true, requeue)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func gotItem(d amqp091.Delivery, encoding string, truncate int64) item {
	payload := d.Body
	size := len(payload)
	if truncate >= 0 && int64(len(payload)) > truncate {
		payload = payload[:truncate]
	}
	it := item{
		"payload_bytes": size, "redelivered": d.Redelivered, "exchange": d.Exchange,
		"routing_key": d.RoutingKey, "message_count": d.MessageCount, "properties": properties(d),
	}
	if encoding == "auto" && utf8.Valid(payload) {
		it["payload"], it["payload_encoding"] = string(payload), "string"
	} else {
		it["payload"], it["payload_encoding"] = base64.StdEncoding.EncodeToString(payload), "base64"
	}
	return it
}

// properties are a message's set properties with RabbitMQ's names.
func properties(d amqp091.Delivery) item {
	p := item{}
	set := func(k, v string) {
		if v != "" {
			p[k] = v
		}
	}
	set("content_type", d.ContentType)
	set("content_encoding", d.ContentEncoding)
	set("correlation_id", d.CorrelationId)
	set("reply_to", d.ReplyTo)
	set("expiration", d.Expiration)
	set("message_id", d.MessageId)
	set("type", d.Type)
	set("user_id", d.UserId)
	set("app_id", d.AppId)
	if d.DeliveryMode != 0 {
		p["delivery_mode"] = d.DeliveryMode
	}
	if d.Priority != 0 {
		p["priority"] = d.Priority
	}
	if !d.Timestamp.IsZero() {
		p["timestamp"] = d.Timestamp.Unix()
	}
	if len(d.Headers) > 0 {
		p["headers"] = jsonValue(d.Headers)
	}
	return p
}
