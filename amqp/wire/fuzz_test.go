package wire

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"testing"
)

// The fuzz targets check that decoding hostile bytes never panics and fails only with an
// *Error (or an I/O error, for frames), and that whatever decodes re-encodes to bytes that
// decode to an equal value and encode to the same bytes again.

// methodSeeds are every generated method filled in, each also truncated and zero, plus the
// connection.start RabbitMQ sent.
func methodSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, zero := range allMethods() {
		m := newMethod(zero.ClassID(), zero.MethodID())
		fillMethod(tb, m, 0)
		payload := mustAppendMethod(tb, m)
		seeds = append(seeds, payload, payload[:len(payload)/2], mustAppendMethod(tb, zero))
	}
	text, err := os.ReadFile("testdata/rabbitmq-3.10.8-connection-start.hex")
	if err != nil {
		tb.Fatal(err)
	}
	return append(seeds, unhex(tb, string(text)))
}

func contentHeaderSeeds(tb testing.TB) [][]byte {
	full, err := AppendContentHeader(nil, &ContentHeader{ClassID: ClassBasic, BodySize: 123, Properties: fullProperties()})
	if err != nil {
		tb.Fatal(err)
	}
	small, err := AppendContentHeader(nil, &ContentHeader{ClassID: ClassBasic, BodySize: 5, Properties: Properties{ContentType: "text/plain", DeliveryMode: 2}})
	if err != nil {
		tb.Fatal(err)
	}
	empty, err := AppendContentHeader(nil, &ContentHeader{ClassID: ClassBasic})
	if err != nil {
		tb.Fatal(err)
	}
	return [][]byte{full, full[:len(full)/2], small, empty, empty[:13]}
}

func wantProtocolError(t *testing.T, err error, codes ...uint16) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	for _, c := range codes {
		if e.Code == c {
			return
		}
	}
	t.Fatalf("code %d (%s), want one of %v", e.Code, e.Text, codes)
}

func FuzzDecodeMethod(f *testing.F) {
	for _, s := range methodSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := DecodeMethod(payload)
		if err != nil {
			wantProtocolError(t, err, FrameError, NotImplemented)
			return
		}
		encoded, err := AppendMethod(nil, m)
		if err != nil {
			t.Fatalf("%s decoded but does not encode: %v", m.Name(), err)
		}
		again, err := DecodeMethod(encoded)
		if err != nil {
			t.Fatalf("%s re-encoded does not decode: %v", m.Name(), err)
		}
		if reencoded := mustAppendMethod(t, again); !bytes.Equal(reencoded, encoded) {
			t.Fatalf("%s: encoding is not stable", m.Name())
		}
		if !methodHasNaN(m) && !reflect.DeepEqual(again, m) {
			t.Fatalf("%s: round trip\n got %#v\nwant %#v", m.Name(), again, m)
		}
	})
}

func FuzzDecodeTable(f *testing.F) {
	full := mustAppendTable(f, sampleTable())
	f.Add(full)
	f.Add(full[:len(full)/2])
	f.Add(mustAppendTable(f, Table{}))
	f.Add(mustAppendTable(f, Table{"x-queue-type": "quorum", "x-max-length": int64(1000)}))
	f.Add(nestedArrays(maxFieldNesting - 1))
	f.Add(nestedArrays(maxFieldNesting + 1))
	f.Add([]byte{0, 0, 0, 11, 1, 'k', 'L', 0, 0, 0, 0, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		tbl, n, err := DecodeTable(data)
		if err != nil {
			wantProtocolError(t, err, FrameError)
			return
		}
		if n < 4 || n > len(data) {
			t.Fatalf("consumed %d of %d bytes", n, len(data))
		}
		encoded, err := AppendTable(nil, tbl)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		again, m, err := DecodeTable(encoded)
		if err != nil || m != len(encoded) {
			t.Fatalf("re-encoded does not decode: %d of %d bytes, %v", m, len(encoded), err)
		}
		if reencoded := mustAppendTable(t, again); !bytes.Equal(reencoded, encoded) {
			t.Fatal("encoding is not stable")
		}
		if !hasNaN(tbl) && !reflect.DeepEqual(again, tbl) {
			t.Fatalf("round trip\n got %#v\nwant %#v", again, tbl)
		}
	})
}

func FuzzDecodeContentHeader(f *testing.F) {
	for _, s := range contentHeaderSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		h, err := DecodeContentHeader(payload)
		if err != nil {
			wantProtocolError(t, err, FrameError, UnexpectedFrame)
			return
		}
		encoded, err := AppendContentHeader(nil, &h)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		again, err := DecodeContentHeader(encoded)
		if err != nil {
			t.Fatalf("re-encoded does not decode: %v", err)
		}
		if reencoded, _ := AppendContentHeader(nil, &again); !bytes.Equal(reencoded, encoded) {
			t.Fatal("encoding is not stable")
		}
		if !hasNaN(h.Properties.Headers) && !reflect.DeepEqual(again, h) {
			t.Fatalf("round trip\n got %#v\nwant %#v", again, h)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	var stream []byte
	for i, s := range methodSeeds(f)[:12] {
		stream = append(stream, frameBytes(FrameMethod, uint16(i), s)...)
	}
	for _, s := range contentHeaderSeeds(f) {
		stream = append(stream, frameBytes(FrameHeader, 1, s)...)
	}
	stream = append(stream, frameBytes(FrameBody, 1, []byte("hello"))...)
	stream = append(stream, frameBytes(FrameHeartbeat, 0, nil)...)
	f.Add(uint16(0), stream)
	f.Add(uint16(FrameMinSize), stream)
	f.Add(uint16(64), stream)
	f.Add(uint16(FrameMinSize), stream[:len(stream)-3])
	f.Add(uint16(0), []byte{FrameMethod, 0, 1, 0x80, 0, 0, 0})
	f.Add(uint16(0), frameBytes(7, 0, []byte{1}))
	f.Fuzz(func(t *testing.T, frameMax uint16, data []byte) {
		r := NewReader(bytes.NewReader(data))
		r.SetFrameMax(uint32(frameMax))
		var rewritten bytes.Buffer
		w := NewWriter(&rewritten)
		for {
			frame, err := r.ReadFrame()
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				wantProtocolError(t, err, FrameError)
				break
			}
			if frameMax != 0 && len(frame.Payload)+frameOverhead > int(frameMax) {
				t.Fatalf("frame of %d bytes passed frame max %d", len(frame.Payload)+frameOverhead, frameMax)
			}
			if err := w.WriteFrame(frame.Type, frame.Channel, frame.Payload); err != nil {
				t.Fatal(err)
			}
		}
		w.Flush()
		// Every frame read is exactly the bytes it came from.
		if !bytes.HasPrefix(data, rewritten.Bytes()) {
			t.Fatal("frames do not re-encode to the input")
		}
	})
}
