package replica

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// The payload of an enqueue entry is the message as the queue keeps it:
//
//	exchange (u8 length, bytes) routing key (u8 length, bytes)
//	content header (u32 length, amqp content header encoding) body (rest)
//
// It is read back from the log when the message is delivered.

func appendMessage(buf []byte, m *queue.Message) ([]byte, error) {
	if len(m.Exchange) > 255 || len(m.RoutingKey) > 255 {
		return nil, errors.New("exchange or routing key longer than 255 bytes")
	}
	buf = append(buf, byte(len(m.Exchange)))
	buf = append(buf, m.Exchange...)
	buf = append(buf, byte(len(m.RoutingKey)))
	buf = append(buf, m.RoutingKey...)
	at := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	buf, err := wire.AppendContentHeader(buf, &wire.ContentHeader{ClassID: wire.ClassBasic, BodySize: uint64(len(m.Body)), Properties: m.Properties})
	if err != nil {
		return nil, fmt.Errorf("encode message properties: %w", err)
	}
	binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
	return append(buf, m.Body...), nil
}

var errBadPayload = errors.New("replica: malformed message payload")

func decodeMessage(p []byte) (*queue.Message, error) {
	take := func(n int) ([]byte, bool) {
		if len(p) < n {
			return nil, false
		}
		b := p[:n]
		p = p[n:]
		return b, true
	}
	var m queue.Message
	for _, dst := range []*string{&m.Exchange, &m.RoutingKey} {
		n, ok := take(1)
		if !ok {
			return nil, errBadPayload
		}
		s, ok := take(int(n[0]))
		if !ok {
			return nil, errBadPayload
		}
		*dst = string(s)
	}
	n, ok := take(4)
	if !ok {
		return nil, errBadPayload
	}
	hdr, ok := take(int(binary.BigEndian.Uint32(n)))
	if !ok {
		return nil, errBadPayload
	}
	h, err := wire.DecodeContentHeader(hdr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadPayload, err)
	}
	m.Properties = h.Properties
	m.Body = p
	return &m, nil
}

// decodeEntryMessage decodes the message an enqueue entry carries.
func decodeEntryMessage(data []byte) (*queue.Message, error) {
	var cmd raftq.Command
	if err := raftq.Decode(data, &cmd); err != nil {
		return nil, err
	}
	if cmd.Op != raftq.OpEnqueue {
		return nil, fmt.Errorf("entry is %v, not an enqueue", cmd.Op)
	}
	return decodeMessage(cmd.Payload)
}

// withCounts adds RabbitMQ 4.x's x-delivery-count and x-acquired-count
// headers to a message handed out before.
func withCounts(m *queue.Message, e raftq.Effect) *queue.Message {
	if e.DeliveryCount == 0 && e.AcquiredCount == 0 {
		return m
	}
	h := make(wire.Table, len(m.Properties.Headers)+2)
	for k, v := range m.Properties.Headers {
		h[k] = v
	}
	if e.DeliveryCount > 0 {
		h["x-delivery-count"] = int64(e.DeliveryCount)
	}
	if e.AcquiredCount > 0 {
		h["x-acquired-count"] = int64(e.AcquiredCount)
	}
	m.Properties.Headers = h
	return m
}
