package wire

import (
	"fmt"
	"io"
	"testing"
)

// cycle serves the same bytes forever, as a connection that keeps publishing would.
type cycle struct {
	data []byte
	off  int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := copy(p, c.data[c.off:])
	c.off = (c.off + n) % len(c.data)
	return n, nil
}

func typicalProperties() *Properties {
	return &Properties{
		ContentType:  "application/json",
		DeliveryMode: 2,
		Headers:      Table{"x-retry": int32(1), "tenant": "acme", "trace-id": "4bf92f3577b34da6"},
		MessageID:    "0195d5c2-7a3e-7c1f-9d55-1b2b3c4d5e6f",
		Timestamp:    1700000000,
	}
}

func BenchmarkReadFrame(b *testing.B) {
	publish := mustAppendMethod(b, &BasicPublish{Exchange: "orders", RoutingKey: "order.created"})
	header, err := AppendContentHeader(nil, &ContentHeader{ClassID: ClassBasic, BodySize: 1024, Properties: *typicalProperties()})
	if err != nil {
		b.Fatal(err)
	}
	var stream []byte
	stream = append(stream, frameBytes(FrameMethod, 1, publish)...)
	stream = append(stream, frameBytes(FrameHeader, 1, header)...)
	stream = append(stream, frameBytes(FrameBody, 1, make([]byte, 1024))...)
	r := NewReader(&cycle{data: stream})
	b.SetBytes(int64(len(stream)) / 3)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBasicPublish(b *testing.B) {
	payload := mustAppendMethod(b, &BasicPublish{Exchange: "orders", RoutingKey: "order.created", Mandatory: true})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMethod(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendContentHeader(b *testing.B) {
	h := &ContentHeader{ClassID: ClassBasic, BodySize: 1024, Properties: *typicalProperties()}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendContentHeader(buf[:0], h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeContentHeader(b *testing.B) {
	payload, err := AppendContentHeader(nil, &ContentHeader{ClassID: ClassBasic, BodySize: 1024, Properties: *typicalProperties()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeContentHeader(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteContent(b *testing.B) {
	for _, size := range []int{1024, 256 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			w := NewWriter(io.Discard)
			deliver := &BasicDeliver{ConsumerTag: "amq.ctag-1", DeliveryTag: 1, Exchange: "orders", RoutingKey: "order.created"}
			props := typicalProperties()
			body := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.WriteContent(1, deliver, props, body, DefaultFrameMax); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
