package wire

import (
	"bytes"
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The byte sequences below were captured from RabbitMQ 3.10.8 (rabbitmq_test.go logs them), so
// these tests check our encoding and decoding against RabbitMQ's without one running.

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// capturedMethods are method frame payloads RabbitMQ sent, with what they decode to. Each
// re-encodes to the same bytes.
var capturedMethods = []struct {
	payload string
	method  Method
}{
	{"000a001e 07ff 00020000 003c", &ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60}},
	{"000a0029 00", &ConnectionOpenOk{}},
	{"0014000b 00000000", &ChannelOpenOk{}},
	{"0028000b", &ExchangeDeclareOk{}},
	{"0032000b 1e616d712e67656e2d6c6a3462644f5741643473347773683249437a613777 00000000 00000000",
		&QueueDeclareOk{Queue: "amq.gen-lj4bdOWAd4s4wsh2ICza7w"}},
	{"00320015", &QueueBindOk{}},
	{"0055000b", &ConfirmSelectOk{}},
	{"003c0050 0000000000000001 00", &BasicAck{DeliveryTag: 1}},
	{"003c0047 0000000000000001 00 1077617272656e2e616d71702e74657374 00 00000000",
		&BasicGetOk{DeliveryTag: 1, Exchange: "warren.amqp.test"}},
	{"00280015", &ExchangeDeleteOk{}},
	{"00140029", &ChannelCloseOk{}},
	{"000a0033", &ConnectionCloseOk{}},
	// RabbitMQ's answer to a truncated queue.declare: FRAME_ERROR, blaming queue.declare.
	{"000a0032 01f5 29" + hex.EncodeToString([]byte("FRAME_ERROR - cannot decode <<0,0,5,113>>")) + "0032 000a",
		&ConnectionClose{ReplyCode: FrameError, ReplyText: "FRAME_ERROR - cannot decode <<0,0,5,113>>", FailingClassID: ClassQueue, FailingMethodID: 10}},
}

func TestDecodeRabbitMQMethods(t *testing.T) {
	for _, c := range capturedMethods {
		payload := unhex(t, c.payload)
		got, err := DecodeMethod(payload)
		if err != nil {
			t.Fatalf("%s: %v", c.method.Name(), err)
		}
		if !reflect.DeepEqual(got, c.method) {
			t.Errorf("%s: got %#v, want %#v", c.method.Name(), got, c.method)
		}
		if ours := mustAppendMethod(t, c.method); !bytes.Equal(ours, payload) {
			t.Errorf("%s: we encode % x\nRabbitMQ sent % x", c.method.Name(), ours, payload)
		}
	}
}

func TestWriteConnectionTuneFrame(t *testing.T) {
	var conn bytes.Buffer
	w := NewWriter(&conn)
	if err := w.WriteMethod(0, &ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60}); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	want := unhex(t, "01 0000 0000000c 000a001e 07ff 00020000 003c ce")
	if !bytes.Equal(conn.Bytes(), want) {
		t.Fatalf("got % x\nwant % x", conn.Bytes(), want)
	}
}

func TestDecodeRabbitMQConnectionStart(t *testing.T) {
	text, err := os.ReadFile("testdata/rabbitmq-3.10.8-connection-start.hex")
	if err != nil {
		t.Fatal(err)
	}
	payload := unhex(t, string(text))
	m, err := DecodeMethod(payload)
	if err != nil {
		t.Fatal(err)
	}
	start := m.(*ConnectionStart)
	if start.VersionMajor != 0 || start.VersionMinor != 9 || start.Mechanisms != "AMQPLAIN PLAIN" || start.Locales != "en_US" {
		t.Fatalf("%+v", start)
	}
	props := start.ServerProperties
	if props["product"] != "RabbitMQ" || props["version"] != "3.10.8" {
		t.Fatalf("server properties %#v", props)
	}
	capabilities, _ := props["capabilities"].(Table)
	for _, c := range []string{"publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify", "connection.blocked", "authentication_failure_close", "per_consumer_qos", "direct_reply_to"} {
		if capabilities[c] != true {
			t.Errorf("capability %s = %#v", c, capabilities[c])
		}
	}
	// RabbitMQ writes capabilities unsorted and we sort, so compare after a round trip.
	again, err := DecodeMethod(mustAppendMethod(t, start))
	if err != nil || !reflect.DeepEqual(again, m) {
		t.Fatalf("round trip: %#v, %v", again, err)
	}
}

// TestDecodeRabbitMQContentHeader decodes the header RabbitMQ delivered for a message published
// with fullProperties (it passes the properties through as the publisher encoded them).
func TestDecodeRabbitMQContentHeader(t *testing.T) {
	payload := unhex(t, `
		003c 0000 0000000000002710 fffc
		10 6170706c69636174696f6e2f6a736f6e 04 677a6970
		000000ff
		  05 6172726179 41 0000001f 49 00000001 53 00000003 74776f 41 00000003 740156 46 00000005 02696e4203
		  04 626f6f6c 74 01
		  05 6279746573 78 00000003 0001ff
		  07 646563696d616c 44 02 ffffcfc7
		  07 666c6f61743332 66 3fc00000
		  07 666c6f61743634 64 400921fb54442d18
		  05 696e743136 73 fed4
		  05 696e743332 49 fffeee90
		  05 696e743634 6c ffffff0000000000
		  04 696e7438 62 fb
		  06 737472696e67 53 00000006 68c3a96c6c6f
		  05 7461626c65 46 0000001b 06646565706572 46 00000008 0178 53 00000001 79 016e 69 00000007
		  04 74696d65 54 000000006553f100
		  06 75696e743136 75 fde8
		  06 75696e743332 69 ee6b2800
		  05 75696e7438 42 c8
		  04 766f6964 56
		02 09 06636f72722d31 077265706c696573 053630303030 056d73672d31 000000006553f100
		0d6f726465722e63726561746564 056775657374 0762696c6c696e67 09636c75737465722d61`)
	h, err := DecodeContentHeader(payload)
	if err != nil {
		t.Fatal(err)
	}
	want := ContentHeader{ClassID: ClassBasic, BodySize: 10000, Properties: fullProperties()}
	want.Properties.Flags = propertyFlags
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("got %#v\nwant %#v", h, want)
	}
	ours, err := AppendContentHeader(nil, &want)
	if err != nil || !bytes.Equal(ours, payload) {
		t.Fatalf("we encode % x, %v", ours, err)
	}
}
