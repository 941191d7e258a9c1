package replica

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/warrenmq/warren/amqp/wire"
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
