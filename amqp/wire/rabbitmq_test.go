package wire

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// These tests talk to a real RabbitMQ when WARREN_RABBITMQ_ADDR names one (guest/guest on "/"),
// for instance the node scripts/rabbitmq.sh starts:
//
//	WARREN_RABBITMQ_ADDR=127.0.0.1:5772 go test -run RabbitMQ -v ./amqp/wire/
//
// With -v they log the frames RabbitMQ sent as Go byte slices; wire_test.go keeps some of
// those captures so the plain test run checks against RabbitMQ's bytes too.

type rabbitConn struct {
	t    *testing.T
	conn net.Conn
	r    *Reader
	w    *Writer
}

func dialRabbitMQ(t *testing.T) *rabbitConn {
	addr := os.Getenv("WARREN_RABBITMQ_ADDR")
	if addr == "" {
		t.Skip("WARREN_RABBITMQ_ADDR not set")
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	c := &rabbitConn{t: t, conn: conn, r: NewReader(conn), w: NewWriter(conn)}
	if err := c.w.WriteProtocolHeader(); err != nil {
		t.Fatal(err)
	}
	c.flush()
	start := c.expect(&ConnectionStart{}).(*ConnectionStart)
	if start.VersionMajor != 0 || start.VersionMinor != 9 || !strings.Contains(start.Mechanisms, "PLAIN") {
		t.Fatalf("connection.start %+v", start)
	}
	c.send(0, &ConnectionStartOk{
		ClientProperties: Table{
			"product": "warren amqp tests",
			"capabilities": Table{
				"publisher_confirms": true, "basic.nack": true, "consumer_cancel_notify": true,
				"connection.blocked": true, "authentication_failure_close": true,
			},
		},
		Mechanism: "PLAIN",
		Response:  "\x00guest\x00guest",
		Locale:    "en_US",
	})
	tune := c.expect(&ConnectionTune{}).(*ConnectionTune)
	// The smallest frame max, so that RabbitMQ splits bodies for us to reassemble.
	c.send(0, &ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: FrameMinSize})
	c.r.SetFrameMax(FrameMinSize)
	c.send(0, &ConnectionOpen{VirtualHost: "/"})
	c.expect(&ConnectionOpenOk{})
	c.send(1, &ChannelOpen{})
	c.expect(&ChannelOpenOk{})
	return c
}

func (c *rabbitConn) flush() {
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rabbitConn) send(channel uint16, m Method) {
	c.t.Helper()
	if err := c.w.WriteMethod(channel, m); err != nil {
		c.t.Fatal(err)
	}
	c.flush()
}

func (c *rabbitConn) sendRaw(frame []byte) {
	if _, err := c.conn.Write(frame); err != nil {
		c.t.Fatal(err)
	}
}

// frame reads the next frame and logs it as a Go literal.
func (c *rabbitConn) frame() Frame {
	c.t.Helper()
	f, err := c.r.ReadFrame()
	if err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	if len(f.Payload) <= 512 {
		c.t.Logf("RabbitMQ sent type %d channel %d payload %s", f.Type, f.Channel, goBytes(f.Payload))
	}
	return f
}

// expect reads a method frame and fails unless it holds a method of the same type as want.
func (c *rabbitConn) expect(want Method) Method {
	c.t.Helper()
	f := c.frame()
	if f.Type != FrameMethod {
		c.t.Fatalf("frame type %d, want a method", f.Type)
	}
	m, err := DecodeMethod(f.Payload)
	if err != nil {
		c.t.Fatal(err)
	}
	if reflect.TypeOf(m) != reflect.TypeOf(want) {
		c.t.Fatalf("got %s %+v, want %s", m.Name(), m, want.Name())
	}
	return m
}

func goBytes(b []byte) string {
	var s strings.Builder
	s.WriteString("[]byte{")
	for i, x := range b {
		if i > 0 {
			s.WriteString(", ")
		}
		fmt.Fprintf(&s, "0x%02x", x)
	}
	s.WriteString("}")
	return s.String()
}

func TestRabbitMQAcceptsWhatWeWriteAndWeReadWhatItSends(t *testing.T) {
	c := dialRabbitMQ(t)
	// RabbitMQ parses these tables (rabbit_binary_parser): every field type must be right.
	c.send(1, &ExchangeDeclare{Exchange: "warren.amqp.test", Type: "fanout", AutoDelete: true, Arguments: sampleTable()})
	c.expect(&ExchangeDeclareOk{})
	args := sampleTable()
	args["x-message-ttl"] = int32(60000)
	c.send(1, &QueueDeclare{Exclusive: true, AutoDelete: true, Arguments: args})
	q := c.expect(&QueueDeclareOk{}).(*QueueDeclareOk)
	c.send(1, &QueueBind{Queue: q.Queue, Exchange: "warren.amqp.test", Arguments: sampleTable()})
	c.expect(&QueueBindOk{})
	c.send(1, &ConfirmSelect{})
	c.expect(&ConfirmSelectOk{})

	body := bytes.Repeat([]byte("0123456789"), 1000) // three body frames at frame max 4096
	props := fullProperties()
	if err := c.w.WriteContent(1, &BasicPublish{Exchange: "warren.amqp.test", Mandatory: true}, &props, body, FrameMinSize); err != nil {
		t.Fatal(err)
	}
	c.flush()
	if ack := c.expect(&BasicAck{}).(*BasicAck); ack.DeliveryTag != 1 {
		t.Fatalf("ack %+v", ack)
	}

	c.send(1, &BasicGet{Queue: q.Queue, NoAck: true})
	getOk := c.expect(&BasicGetOk{}).(*BasicGetOk)
	if getOk.Exchange != "warren.amqp.test" || getOk.DeliveryTag != 1 {
		t.Fatalf("get-ok %+v", getOk)
	}
	hf := c.frame()
	h, err := DecodeContentHeader(hf.Payload)
	if err != nil {
		t.Fatal(err)
	}
	props.Flags = propertyFlags
	if h.BodySize != uint64(len(body)) || !reflect.DeepEqual(h.Properties, props) {
		t.Fatalf("header %+v\nwant %+v", h, props)
	}
	var got []byte
	for uint64(len(got)) < h.BodySize {
		f := c.frame()
		if f.Type != FrameBody || len(f.Payload)+frameOverhead > FrameMinSize {
			t.Fatalf("body frame of type %d, %d bytes", f.Type, len(f.Payload))
		}
		got = append(got, f.Payload...)
	}
	if !bytes.Equal(got, body) {
		t.Fatal("body differs")
	}

	c.send(1, &ExchangeDelete{Exchange: "warren.amqp.test"})
	c.expect(&ExchangeDeleteOk{})
	c.send(1, &ChannelClose{ReplyCode: ReplySuccess, ReplyText: "bye"})
	c.expect(&ChannelCloseOk{})
	c.send(0, &ConnectionClose{ReplyCode: ReplySuccess, ReplyText: "bye"})
	c.expect(&ConnectionCloseOk{})
}

// TestRabbitMQReplyCodes checks the codes DecodeMethod and DecodeContentHeader choose against
// what RabbitMQ answers to the same bytes.
func TestRabbitMQReplyCodes(t *testing.T) {
	truncatedDeclare := []byte{0, 50, 0, 10, 0, 0, 5, 'q'}
	badUTF8 := []byte{0, 50, 0, 10, 0, 0, 2, 0xC3, 0x28, 0, 0, 0, 0, 0}
	tests := []struct {
		name   string
		frames [][]byte
		ours   func() error
	}{
		{"truncated arguments", [][]byte{frameBytes(FrameMethod, 1, truncatedDeclare)},
			func() error { _, err := DecodeMethod(truncatedDeclare); return err }},
		{"malformed UTF-8", [][]byte{frameBytes(FrameMethod, 1, badUTF8)},
			func() error { _, err := DecodeMethod(badUTF8); return err }},
		{"trailing byte", [][]byte{frameBytes(FrameMethod, 1, []byte{0, 60, 0, 80, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0})},
			func() error { _, err := DecodeMethod([]byte{0, 60, 0, 80, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}); return err }},
		{"header weight", [][]byte{
			frameBytes(FrameMethod, 1, mustAppendMethod(t, &BasicPublish{RoutingKey: "nowhere"})),
			frameBytes(FrameHeader, 1, []byte{0, 60, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
		}, func() error {
			_, err := DecodeContentHeader([]byte{0, 60, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
			return err
		}},
		{"bad frame end", [][]byte{append(frameBytes(FrameHeartbeat, 0, nil)[:7], 0)},
			func() error {
				_, err := NewReader(bytes.NewReader(append(frameBytes(FrameHeartbeat, 0, nil)[:7], 0))).ReadFrame()
				return err
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialRabbitMQ(t)
			for _, f := range tt.frames {
				c.sendRaw(f)
			}
			closed := c.expect(&ConnectionClose{}).(*ConnectionClose)
			t.Logf("RabbitMQ: %d %q", closed.ReplyCode, closed.ReplyText)
			wantCode(t, tt.ours(), closed.ReplyCode)
		})
	}
}

// TestRabbitMQUnknownMethod shows what RabbitMQ does with a method it does not know: it drops
// the connection without a connection.close. Warren answers 540 NOT_IMPLEMENTED instead.
func TestRabbitMQUnknownMethod(t *testing.T) {
	c := dialRabbitMQ(t)
	c.sendRaw(frameBytes(FrameMethod, 1, []byte{0, 60, 0x03, 0xE7}))
	f, err := c.r.ReadFrame()
	t.Logf("after an unknown method RabbitMQ sent %+v, %v", f, err)
	if err == nil {
		if m, derr := DecodeMethod(f.Payload); derr == nil {
			t.Logf("that is %s %+v", m.Name(), m)
		}
	}
}
