package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/proto/adminpb"
)

// peek: a ready message of a quorum queue, left where it is, as
// rabbitmq-queues peek shows it.

func init() {
	commands = append(commands, &command{
		name:    "peek",
		args:    []string{"QUEUE", "POSITION"},
		summary: "the message at POSITION (1 for the next) among a quorum queue's ready messages",
		help: `Shows the message at POSITION among quorum queue QUEUE's ready messages, in
the order they would be delivered (messages that came back first, then by
priority, then by age), without taking it, as rabbitmq-queues peek does: the
exchange and routing keys it was published with, the first 64 bytes of its
body, its properties, and its headers as header.NAME, with the
x-delivery-count a delivery now would carry. Messages checked out to a
consumer or waiting out a delayed retry have no position. The queue's leader
answers; a hibernating queue is woken. Exits 1 if the queue has no message
at POSITION.`,
		setup: peek,
	})
}

type peekReport struct {
	Vhost    string `json:"vhost"`
	Queue    string `json:"queue"`
	Position uint32 `json:"position"`
	Leader   string `json:"leader"`
	// Message is the fields as rabbitmq-queues peek names them; fields
	// keeps their order for the text table.
	Message map[string]any `json:"message"`
	fields  []peekField
}

type peekField struct {
	key   string
	value any
}

func peek(fs *flag.FlagSet) body {
	vhost := fs.String("vhost", "/", "the queue's `vhost`")
	return func(ctx context.Context, c adminpb.AdminClient, args []string) (report, error) {
		pos, err := strconv.ParseUint(args[1], 10, 32)
		if err != nil || pos < 1 {
			return nil, fmt.Errorf("position value must be a positive integer, not %q", args[1])
		}
		resp, err := c.Peek(ctx, &adminpb.PeekRequest{Vhost: *vhost, Name: args[0], Position: uint32(pos)})
		if err != nil {
			return nil, err
		}
		h, err := wire.DecodeContentHeader(resp.ContentHeader)
		if err != nil {
			return nil, fmt.Errorf("the node sent a malformed content header: %w", err)
		}
		r := &peekReport{Vhost: resp.Vhost, Queue: resp.Name, Position: resp.Position, Leader: resp.Leader}
		r.fields = peekFields(resp, &h.Properties)
		r.Message = make(map[string]any, len(r.fields))
		for _, f := range r.fields {
			r.Message[f.key] = f.value
		}
		return r, nil
	}
}

// peekFields lists a peeked message's fields in rabbitmq-queues peek's
// names: exchange, routing keys (the routing key and any CC), the body's
// first bytes, each property present, then each header.
func peekFields(resp *adminpb.PeekResponse, p *wire.Properties) []peekField {
	keys := []any{resp.RoutingKey}
	if cc, ok := p.Headers["CC"].([]any); ok {
		keys = append(keys, cc...)
	}
	fs := []peekField{{"exchange", resp.Exchange}, {"routing_keys", keys}}
	if utf8.Valid(resp.Payload) {
		fs = append(fs, peekField{"payload (max 64 bytes)", string(resp.Payload)})
	} else {
		fs = append(fs, peekField{"payload (max 64 bytes, base64)", base64.StdEncoding.EncodeToString(resp.Payload)})
	}
	fs = append(fs, peekField{"body size", resp.BodySize})
	// In the order of the basic class's properties; one the message
	// carries, or sets to other than its zero value, is shown.
	for _, prop := range []struct {
		key   string
		flag  uint16
		value any
		set   bool
	}{
		{"content_type", wire.FlagContentType, p.ContentType, p.ContentType != ""},
		{"content_encoding", wire.FlagContentEncoding, p.ContentEncoding, p.ContentEncoding != ""},
		{"delivery_mode", wire.FlagDeliveryMode, p.DeliveryMode, p.DeliveryMode != 0},
		{"priority", wire.FlagPriority, p.Priority, p.Priority != 0},
		{"correlation_id", wire.FlagCorrelationID, p.CorrelationID, p.CorrelationID != ""},
		{"reply_to", wire.FlagReplyTo, p.ReplyTo, p.ReplyTo != ""},
		{"expiration", wire.FlagExpiration, p.Expiration, p.Expiration != ""},
		{"message_id", wire.FlagMessageID, p.MessageID, p.MessageID != ""},
		{"timestamp", wire.FlagTimestamp, p.Timestamp, p.Timestamp != 0},
		{"type", wire.FlagType, p.Type, p.Type != ""},
		{"user_id", wire.FlagUserID, p.UserID, p.UserID != ""},
		{"app_id", wire.FlagAppID, p.AppID, p.AppID != ""},
		{"cluster_id", wire.FlagClusterID, p.ClusterID, p.ClusterID != ""},
	} {
		if p.Flags&prop.flag != 0 || prop.set {
			fs = append(fs, peekField{prop.key, prop.value})
		}
	}
	names := make([]string, 0, len(p.Headers))
	for k := range p.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fs = append(fs, peekField{"header." + k, p.Headers[k]})
	}
	return fs
}

func (r *peekReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "Message at position %d of quorum queue '%s' in vhost '%s' (leader %s)\n\n", r.Position, r.Queue, r.Vhost, r.Leader)
	rows := make([][]string, len(r.fields))
	for i, f := range r.fields {
		rows[i] = []string{f.key, peekValue(f.value)}
	}
	table(w, []string{"KEY", "VALUE"}, rows)
}

// peekValue renders a field's value for the text table: text as it is,
// a time as RFC 3339, anything else (numbers, tables, arrays) as JSON.
func peekValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case time.Time:
		return v.Format(time.RFC3339)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
