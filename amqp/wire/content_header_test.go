package wire

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func fullProperties() Properties {
	return Properties{
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		Headers:         sampleTable(),
		DeliveryMode:    2,
		Priority:        9,
		CorrelationID:   "corr-1",
		ReplyTo:         "replies",
		Expiration:      "60000",
		MessageID:       "msg-1",
		Timestamp:       1700000000,
		Type:            "order.created",
		UserID:          "guest",
		AppID:           "billing",
		ClusterID:       "cluster-a",
	}
}

func TestContentHeaderRoundTripsAllProperties(t *testing.T) {
	h := ContentHeader{ClassID: ClassBasic, BodySize: 1 << 33, Properties: fullProperties()}
	encoded, err := AppendContentHeader(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeContentHeader(encoded)
	if err != nil {
		t.Fatal(err)
	}
	// Decoding records which properties were present.
	h.Properties.Flags = propertyFlags
	if !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip\n got %#v\nwant %#v", got, h)
	}
	again, err := AppendContentHeader(nil, &got)
	if err != nil || !bytes.Equal(again, encoded) {
		t.Fatalf("re-encoding differs: %v", err)
	}
}

func TestContentHeaderWireFormat(t *testing.T) {
	h := ContentHeader{ClassID: ClassBasic, BodySize: 5, Properties: Properties{ContentType: "text/plain", DeliveryMode: 2}}
	got, err := AppendContentHeader(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0, 60, // class
		0, 0, // weight
		0, 0, 0, 0, 0, 0, 0, 5, // body size
		0x90, 0x00, // content-type and delivery-mode present
		10, 't', 'e', 'x', 't', '/', 'p', 'l', 'a', 'i', 'n',
		2,
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
}

func TestPropertyFlagsKeepPresentZeroValues(t *testing.T) {
	// A property present on the wire with a zero value (an empty content-type, delivery mode 0)
	// is written back, so relaying a header preserves it exactly.
	wire := []byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x90, 0x00, 0, 0}
	h, err := DecodeContentHeader(wire)
	if err != nil {
		t.Fatal(err)
	}
	if h.Properties.Flags != FlagContentType|FlagDeliveryMode {
		t.Fatalf("flags %#04x", h.Properties.Flags)
	}
	again, err := AppendContentHeader(nil, &h)
	if err != nil || !bytes.Equal(again, wire) {
		t.Fatalf("got % x, %v", again, err)
	}
}

func TestPropertiesWithoutFlagsAreWrittenWhenSet(t *testing.T) {
	h := ContentHeader{ClassID: ClassBasic, Properties: Properties{Priority: 1}}
	got, err := AppendContentHeader(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[12:], []byte{0x08, 0x00, 1}) {
		t.Fatalf("got % x", got[12:])
	}
}

func TestDecodeContentHeaderErrors(t *testing.T) {
	valid, err := AppendContentHeader(nil, &ContentHeader{ClassID: ClassBasic, BodySize: 3, Properties: fullProperties()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		payload []byte
		code    uint16
	}{
		{"empty", nil, FrameError},
		{"no flags", valid[:12], FrameError},
		{"truncated property", valid[:len(valid)-1], FrameError},
		{"trailing bytes", append(bytes.Clone(valid), 0), FrameError},
		// A continuation flag is ignored, as RabbitMQ ignores it, so the word after is left over.
		{"continuation word", []byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x01, 0, 0}, FrameError},
		{"non-zero weight", []byte{0, 60, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, UnexpectedFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeContentHeader(tt.payload)
			wantCode(t, err, tt.code)
		})
	}
}

func TestAppendContentHeaderRefusesLongProperty(t *testing.T) {
	buf := []byte{7}
	out, err := AppendContentHeader(buf, &ContentHeader{ClassID: ClassBasic, Properties: Properties{MessageID: strings.Repeat("m", 256)}})
	if err == nil || !strings.Contains(err.Error(), "message-id") {
		t.Fatalf("got %v", err)
	}
	if !bytes.Equal(out, []byte{7}) {
		t.Fatalf("buf changed on error: % x", out)
	}
}
