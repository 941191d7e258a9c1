package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestEveryMethodRoundTrips(t *testing.T) {
	methods := allMethods()
	if len(methods) < 60 {
		t.Fatalf("found %d methods; the spec has 66", len(methods))
	}
	for _, zero := range methods {
		for seed := range 2 {
			m := newMethod(zero.ClassID(), zero.MethodID())
			fillMethod(t, m, seed)
			payload := mustAppendMethod(t, m)
			got, err := DecodeMethod(payload)
			if err != nil {
				t.Fatalf("%s: DecodeMethod: %v", m.Name(), err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Errorf("%s: round trip\n got %#v\nwant %#v", m.Name(), got, m)
			}
			if again := mustAppendMethod(t, got); !bytes.Equal(again, payload) {
				t.Errorf("%s: re-encoding differs", m.Name())
			}
		}
		// Zero values round-trip too; empty tables come back nil.
		m := newMethod(zero.ClassID(), zero.MethodID())
		got, err := DecodeMethod(mustAppendMethod(t, m))
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Errorf("%s: zero value round trip: %#v, %v", m.Name(), got, err)
		}
	}
}

func TestMethodTraits(t *testing.T) {
	content := map[string]bool{"basic.publish": true, "basic.return": true, "basic.deliver": true, "basic.get-ok": true}
	for _, m := range allMethods() {
		if m.HasContent() != content[m.Name()] {
			t.Errorf("%s: HasContent() = %v", m.Name(), m.HasContent())
		}
		if MethodName(m.ClassID(), m.MethodID()) != m.Name() {
			t.Errorf("%s: MethodName disagrees", m.Name())
		}
		if !strings.Contains(m.Name(), ".") {
			t.Errorf("%s: name is not class.method", m.Name())
		}
	}
	for _, m := range []Method{&QueueDeclare{}, &BasicConsume{}, &ConnectionTune{}, &BasicQos{}, &ConfirmSelect{}, &TxCommit{}} {
		if !m.Synchronous() {
			t.Errorf("%s should be synchronous", m.Name())
		}
	}
	for _, m := range []Method{&BasicPublish{}, &BasicAck{}, &QueueDeclareOk{}, &BasicNack{}} {
		if m.Synchronous() {
			t.Errorf("%s should not be synchronous", m.Name())
		}
	}
}

func TestBitsShareAnOctet(t *testing.T) {
	// queue.declare: ticket, queue, then passive, durable, exclusive, auto-delete, no-wait in one
	// octet (lowest bit first), then arguments.
	payload := mustAppendMethod(t, &QueueDeclare{Queue: "q", Durable: true, AutoDelete: true, NoWait: true})
	want := []byte{0, 50, 0, 10, 0, 0, 1, 'q', 0b11010, 0, 0, 0, 0}
	if !bytes.Equal(payload, want) {
		t.Fatalf("got % x\nwant % x", payload, want)
	}
}

func TestReservedArgumentsAreZeroAndSkipped(t *testing.T) {
	// connection.open with a non-empty capabilities string and insist set, as an 0-8 client
	// might send: both are read past and re-encoded as zero.
	payload := []byte{0, 10, 0, 40, 1, '/', 3, 'a', 'b', 'c', 1}
	m, err := DecodeMethod(payload)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.(*ConnectionOpen).VirtualHost; got != "/" {
		t.Fatalf("virtual host %q", got)
	}
	if got, want := mustAppendMethod(t, m), []byte{0, 10, 0, 40, 1, '/', 0, 0}; !bytes.Equal(got, want) {
		t.Fatalf("got % x, want % x", got, want)
	}
}

func TestDecodeMethodErrors(t *testing.T) {
	publish := mustAppendMethod(t, &BasicPublish{Exchange: "ex", RoutingKey: "rk", Mandatory: true})
	tests := []struct {
		name    string
		payload []byte
		code    uint16
	}{
		{"empty", nil, FrameError},
		{"no method id", []byte{0, 60}, FrameError},
		{"unknown class", []byte{0, 99, 0, 10}, NotImplemented},
		{"unknown method", []byte{0, 60, 0, 99}, NotImplemented},
		{"truncated", publish[:len(publish)-1], FrameError},
		{"trailing byte", append(bytes.Clone(publish), 0), FrameError},
		{"shortstr past end", []byte{0, 60, 0, 40, 0, 0, 200, 'x'}, FrameError},
		{"bad utf8 in queue name", []byte{0, 50, 0, 10, 0, 0, 2, 0xC3, 0x28, 0, 0, 0, 0, 0}, FrameError},
		{"bad table", []byte{0, 50, 0, 10, 0, 0, 0, 0, 0, 0, 0, 3, 1, 'k', 'Z'}, FrameError},
		{"table longer than payload", []byte{0, 50, 0, 10, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF}, FrameError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeMethod(tt.payload)
			if m != nil {
				t.Fatalf("got method %#v", m)
			}
			wantCode(t, err, tt.code)
		})
	}
}

func TestDecodeMethodErrorNamesTheMethod(t *testing.T) {
	_, err := DecodeMethod([]byte{0, 50, 0, 10, 0})
	e := wantCode(t, err, FrameError)
	if e.ClassID != ClassQueue || e.MethodID != 10 {
		t.Fatalf("error blames %d.%d", e.ClassID, e.MethodID)
	}
	if !strings.HasPrefix(e.Text, "FRAME_ERROR - cannot decode queue.declare") {
		t.Fatalf("text %q", e.Text)
	}
}

func TestContentMethodsSkipUTF8Check(t *testing.T) {
	// RabbitMQ does not check short strings in basic.publish and friends; neither do we.
	payload := []byte{0, 60, 0, 40, 0, 0, 1, 0xFF, 0, 0}
	m, err := DecodeMethod(payload)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.(*BasicPublish).Exchange; got != "\xFF" {
		t.Fatalf("exchange %q", got)
	}
}

func TestAppendArgsRefusesLongShortstr(t *testing.T) {
	long := strings.Repeat("q", 256)
	buf := []byte("prefix")
	out, err := AppendMethod(buf, &QueueDeclare{Queue: long})
	if !errors.Is(err, errShortstrTooLong) {
		t.Fatalf("got %v, want shortstr error", err)
	}
	if !bytes.Equal(out, []byte("prefix")) {
		t.Fatalf("buf changed on error: %q", out)
	}
	if !strings.Contains(err.Error(), "queue.declare") || !strings.Contains(err.Error(), "queue") {
		t.Fatalf("error does not say where: %v", err)
	}
	// 255 bytes is fine.
	if _, err := AppendMethod(nil, &QueueDeclare{Queue: long[:255]}); err != nil {
		t.Fatal(err)
	}
}

func TestAppendArgsRefusesBadTableValue(t *testing.T) {
	_, err := AppendMethod(nil, &QueueDeclare{Queue: "q", Arguments: Table{"x-bad": struct{}{}}})
	if !errors.Is(err, errUnsupportedType) {
		t.Fatalf("got %v", err)
	}
}

func TestMethodHeaderIDs(t *testing.T) {
	payload := mustAppendMethod(t, &BasicAck{DeliveryTag: 1})
	if c, m := binary.BigEndian.Uint16(payload), binary.BigEndian.Uint16(payload[2:]); c != 60 || m != 80 {
		t.Fatalf("ids %d.%d", c, m)
	}
}
