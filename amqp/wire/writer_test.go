package wire

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestWriteMethodReadsBack(t *testing.T) {
	var conn bytes.Buffer
	w := NewWriter(&conn)
	want := &QueueDeclare{Queue: "orders", Durable: true, Arguments: Table{"x-queue-type": "quorum"}}
	if err := w.WriteMethod(3, want); err != nil {
		t.Fatal(err)
	}
	if conn.Len() != 0 {
		t.Fatal("wrote before Flush")
	}
	if w.Buffered() == 0 {
		t.Fatal("nothing buffered")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f, err := NewReader(&conn).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != FrameMethod || f.Channel != 3 {
		t.Fatalf("frame %+v", f)
	}
	got, err := DecodeMethod(f.Payload)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, %v", got, err)
	}
}

func TestWriteHeartbeatAndProtocolHeader(t *testing.T) {
	var conn bytes.Buffer
	w := NewWriter(&conn)
	if err := w.WriteProtocolHeader(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteHeartbeat(); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "AMQP\x00\x00\x09\x01" + "\x08\x00\x00\x00\x00\x00\x00\xCE"
	if conn.String() != want {
		t.Fatalf("got % x", conn.Bytes())
	}
}

// readContent reads back what WriteContent wrote, checking every frame against frameMax.
func readContent(t *testing.T, wire []byte, frameMax uint32) (Method, ContentHeader, []byte, int) {
	t.Helper()
	r := NewReader(bytes.NewReader(wire))
	r.SetFrameMax(frameMax) // so ReadFrame itself refuses an oversize frame
	var frames []Frame
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if size := len(f.Payload) + frameOverhead; frameMax != 0 && size > int(frameMax) {
			t.Fatalf("frame of %d bytes exceeds frame max %d", size, frameMax)
		}
		frames = append(frames, f)
	}
	if len(frames) < 2 || frames[0].Type != FrameMethod || frames[1].Type != FrameHeader {
		t.Fatalf("frames %+v", frames)
	}
	m, err := DecodeMethod(frames[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	h, err := DecodeContentHeader(frames[1].Payload)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	for _, f := range frames[2:] {
		if f.Type != FrameBody || f.Channel != 5 {
			t.Fatalf("frame %d: type %d, channel %d", f.Type, f.Type, f.Channel)
		}
		body = append(body, f.Payload...)
	}
	return m, h, body, len(frames) - 2
}

func TestWriteContentSplitsBody(t *testing.T) {
	const frameMax = FrameMinSize
	maxBody := frameMax - frameOverhead
	tests := []struct {
		bodySize   int
		frameMax   uint32
		bodyFrames int
	}{
		{0, frameMax, 0},
		{1, frameMax, 1},
		{maxBody, frameMax, 1},
		{maxBody + 1, frameMax, 2},
		{3 * maxBody, frameMax, 3},
		{3*maxBody + 7, frameMax, 4},
		{100000, 0, 1},
		{0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d bytes in %d", tt.bodySize, tt.frameMax), func(t *testing.T) {
			body := bytes.Repeat([]byte{0xAB}, tt.bodySize)
			deliver := &BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 9, Exchange: "ex", RoutingKey: "rk"}
			props := &Properties{ContentType: "text/plain", DeliveryMode: 2}

			var conn bytes.Buffer
			w := NewWriter(&conn)
			if err := w.WriteContent(5, deliver, props, body, tt.frameMax); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			m, h, gotBody, bodyFrames := readContent(t, conn.Bytes(), tt.frameMax)
			if !reflect.DeepEqual(m, deliver) {
				t.Errorf("method %#v", m)
			}
			if h.ClassID != ClassBasic || h.BodySize != uint64(tt.bodySize) || h.Properties.ContentType != "text/plain" {
				t.Errorf("header %+v", h)
			}
			if !bytes.Equal(gotBody, body) {
				t.Errorf("body of %d bytes, want %d", len(gotBody), len(body))
			}
			if bodyFrames != tt.bodyFrames {
				t.Errorf("%d body frames, want %d", bodyFrames, tt.bodyFrames)
			}
		})
	}
}

func TestWriteContentWithoutProperties(t *testing.T) {
	var conn bytes.Buffer
	w := NewWriter(&conn)
	if err := w.WriteContent(5, &BasicPublish{RoutingKey: "q"}, nil, []byte("hi"), DefaultFrameMax); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	_, h, body, _ := readContent(t, conn.Bytes(), DefaultFrameMax)
	if !reflect.DeepEqual(h.Properties, Properties{}) || string(body) != "hi" {
		t.Fatalf("header %+v, body %q", h, body)
	}
}

func TestWriteContentErrorsWriteNothing(t *testing.T) {
	bigHeaders := Table{"h": strings.Repeat("x", 5000)}
	tests := []struct {
		name     string
		method   Method
		props    *Properties
		frameMax uint32
		want     string
	}{
		{"method without content", &BasicAck{}, nil, 0, "carries no content"},
		{"frame max too small", &BasicPublish{}, nil, 8, "no room"},
		{"header larger than frame max", &BasicPublish{}, &Properties{Headers: bigHeaders}, FrameMinSize, "exceeds frame max"},
		{"bad property", &BasicPublish{}, &Properties{Type: strings.Repeat("t", 300)}, 0, "type"},
		{"bad argument", &BasicPublish{Exchange: strings.Repeat("e", 300)}, nil, 0, "exchange"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var conn bytes.Buffer
			w := NewWriter(&conn)
			err := w.WriteContent(1, tt.method, tt.props, []byte("body"), tt.frameMax)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if w.Buffered() != 0 {
				t.Fatalf("%d bytes buffered after an error", w.Buffered())
			}
		})
	}
}

func TestWriterDoesNotAllocateInSteadyState(t *testing.T) {
	w := NewWriter(io.Discard)
	deliver := &BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 1, Exchange: "ex", RoutingKey: "rk"}
	props := &Properties{ContentType: "text/plain", Headers: Table{"k": "v"}}
	ack := &BasicAck{DeliveryTag: 1}
	body := make([]byte, 10000)
	allocs := testing.AllocsPerRun(100, func() {
		if err := w.WriteContent(1, deliver, props, body, FrameMinSize); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMethod(1, ack); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per delivery", allocs)
	}
}
