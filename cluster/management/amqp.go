package management

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// What RabbitMQ's API does as a client, Warren's does as one: an AMQP
// connection to the node's own listener, logged in as the HTTP caller,
// so that the broker checks the caller's permissions, limits and the
// equivalence of declarations exactly as for any client.

// amqpDialWait bounds the connection to the node's own listener.
const amqpDialWait = 10 * time.Second

// withChannel runs fn on a channel of a connection to vhost as c.
func (s *Server) withChannel(ctx context.Context, c *caller, vhost string, fn func(ch *amqp091.Channel) error) error {
	if s.cfg.AMQPAddr == "" {
		return unavailable("this node has no AMQP listener")
	}
	cfg := amqp091.Config{
		SASL:       []amqp091.Authentication{&amqp091.PlainAuth{Username: c.name, Password: c.password}},
		Vhost:      vhost,
		Heartbeat:  0,
		Properties: amqp091.Table{"connection_name": "management API: " + c.name, "product": "Warren management API"},
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: amqpDialWait}
			return d.DialContext(ctx, network, addr)
		},
	}
	conn, err := amqp091.DialConfig("amqp://"+s.cfg.AMQPAddr+"/", cfg)
	if err != nil {
		return amqpError(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return amqpError(err)
	}
	defer ch.Close()
	return amqpError(fn(ch))
}

// amqpError is the HTTP answer for what the broker refused, as
// RabbitMQ's API gives it: a missing object is 404, an access refusal
// 401 not_authorised, a failed precondition (inequivalent arguments,
// a queue in use or not empty) 400 with the broker's text.
func amqpError(err error) error {
	if err == nil {
		return nil
	}
	var ae *amqp091.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp091.NotFound:
			return notFound()
		case amqp091.AccessRefused, amqp091.NotAllowed:
			return notAuthorised(ae.Reason)
		case amqp091.PreconditionFailed, amqp091.ResourceLocked, amqp091.NotImplemented, amqp091.InvalidPath, amqp091.CommandInvalid, amqp091.SyntaxError:
			return badRequest("%s", ae.Reason)
		case amqp091.ResourceError:
			return unavailable("%s", ae.Reason)
		}
		return internalError(errors.New(ae.Reason))
	}
	var api *apiError
	if errors.As(err, &api) {
		return err
	}
	if errors.Is(err, amqp091.ErrSASL) || errors.Is(err, amqp091.ErrCredentials) {
		return notAuthorised("Login failed")
	}
	return unavailable("AMQP: %v", err)
}

// table is a JSON object as AMQP arguments: whole numbers as integers
// (x-max-length must be one), nested objects as tables.
func table(m map[string]any) amqp091.Table {
	t := amqp091.Table{}
	for k, v := range m {
		t[k] = amqpValue(v)
	}
	return t
}

func amqpValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
		return x
	case map[string]any:
		return table(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = amqpValue(e)
		}
		return out
	}
	return v
}

// jsonValue is an AMQP field value as JSON shows it.
func jsonValue(v any) any {
	switch x := v.(type) {
	case amqp091.Table:
		m := map[string]any{}
		for k, e := range x {
			m[k] = jsonValue(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case []byte:
		return string(x)
	case time.Time:
		return x.Unix()
	}
	return v
}
