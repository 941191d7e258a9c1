package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Multi-frame messages. Every client negotiates the smallest frame size
// AMQP allows, so that a body of the large queues (10 to 60 KB) spans 3 to
// 15 body frames on the way in and out, and the broker must put the frames
// together in order, keep the body whole through its log, snapshots and
// forwarding between nodes, and cut it into frames again. Each message's
// body, headers and properties are a pure function of its ID, so a
// consumer checks every byte of what it got: the body's SHA-256 against
// the checksum header, the body against the one published, and every
// header, of each AMQP field type the clients write, against its value
// and type as published.

// frameMax is the frame size the harness's clients negotiate: AMQP's
// minimum.
const frameMax = 4096

// largeMin and largeMax bound a large body's length.
const (
	largeMin = 10 << 10
	largeMax = 60 << 10
)

// largeHeaderPrefix marks the headers the producer writes; the broker may
// add its own (x-delivery-count), which the check leaves alone.
const largeHeaderPrefix = "jepsen-"

// largeBody is message id's body: its ID on a line, then bytes drawn from
// a source seeded with the ID.
func largeBody(id uint64) []byte {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], id)
	src := rand.NewChaCha8(seed)
	n := largeMin + int(src.Uint64()%uint64(largeMax-largeMin+1))
	b := make([]byte, n)
	src.Read(b)
	line := strconv.AppendUint(nil, id, 10)
	line = append(line, '\n')
	copy(b, line)
	return b
}

// largeHeaders are message id's headers: its body's checksum and a value
// of every field type AMQP 0-9-1 tables carry (as RabbitMQ reads them),
// nested tables and arrays among them.
func largeHeaders(id uint64, body []byte) amqp091.Table {
	sum := sha256.Sum256(body)
	p := largeHeaderPrefix
	return amqp091.Table{
		p + "sha256":    hex.EncodeToString(sum[:]),
		p + "bool":      id%2 == 0,
		p + "int8":      int8(id),
		p + "uint8":     uint8(id),
		p + "int16":     int16(id),
		p + "uint16":    uint16(id),
		p + "int32":     int32(id),
		p + "uint32":    uint32(id),
		p + "int64":     -int64(id),
		p + "float32":   float32(id) / 8,
		p + "float64":   float64(id) / 3,
		p + "decimal":   amqp091.Decimal{Scale: 2, Value: int32(id)},
		p + "string":    "ünïcødé ✓ " + strconv.FormatUint(id, 10),
		p + "bytes":     slices.Clone(sum[:8]),
		p + "timestamp": time.Unix(1_700_000_000+int64(id), 0).UTC(),
		p + "array":     []any{int32(id), "two", true, amqp091.Table{"three": int64(3)}},
		p + "table":     amqp091.Table{"id": int64(id), "nested": amqp091.Table{"void": nil, "bytes": []byte{0, 1, 2}}},
		p + "void":      nil,
	}
}

// largeContentType and largeType are the large messages' content type and
// type properties.
const (
	largeContentType = "application/octet-stream"
	largeType        = "jepsen.large"
)

// largePublishing is message id's publishing and its body's length.
func largePublishing(id uint64) (amqp091.Publishing, int) {
	body := largeBody(id)
	return amqp091.Publishing{
		DeliveryMode: amqp091.Persistent, MessageId: strconv.FormatUint(id, 10),
		ContentType: largeContentType, Type: largeType,
		Headers: largeHeaders(id, body), Body: body,
	}, len(body)
}

// inspectLarge checks a delivery of a large queue against what its
// producer published: it returns the ID the body names (0 when it names
// none) and how the delivery differs, "" when intact.
func inspectLarge(d amqp091.Delivery) (id uint64, corrupt string) {
	line, _, ok := bytes.Cut(d.Body, []byte{'\n'})
	id, err := strconv.ParseUint(string(line), 10, 64)
	if !ok || err != nil {
		return 0, fmt.Sprintf("a body of %d bytes without its ID line", len(d.Body))
	}
	sum := sha256.Sum256(d.Body)
	if got, want := d.Headers[largeHeaderPrefix+"sha256"], hex.EncodeToString(sum[:]); got != want {
		return id, fmt.Sprintf("the body's SHA-256 is %s, its header says %v", want, got)
	}
	body := largeBody(id)
	if !bytes.Equal(d.Body, body) {
		at := 0
		for at < min(len(body), len(d.Body)) && body[at] == d.Body[at] {
			at++
		}
		return id, fmt.Sprintf("a body of %d bytes, %d published, differing from byte %d", len(d.Body), len(body), at)
	}
	if diff := headersDiff(largeHeaders(id, body), d.Headers); diff != "" {
		return id, diff
	}
	if d.MessageId != strconv.FormatUint(id, 10) || d.ContentType != largeContentType || d.Type != largeType {
		return id, fmt.Sprintf("properties message-id %q, content-type %q, type %q", d.MessageId, d.ContentType, d.Type)
	}
	return id, ""
}

// headersDiff says how got differs from want among the producer's
// headers: a header missing, of another value or field type, or one the
// producer did not write. "" when they match.
func headersDiff(want, got amqp091.Table) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		switch {
		case !ok:
			diffs = append(diffs, "header "+k+" missing")
		case !reflect.DeepEqual(normalField(want[k]), normalField(g)):
			diffs = append(diffs, fmt.Sprintf("header %s is %#v (%T), published %#v (%T)", k, g, g, want[k], want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok && strings.HasPrefix(k, largeHeaderPrefix) {
			diffs = append(diffs, "header "+k+" never published")
		}
	}
	return strings.Join(diffs, "; ")
}

// normalField is a field value with its timestamps in UTC (the client
// reads them in the local zone), so that equal values compare equal.
func normalField(v any) any {
	switch v := v.(type) {
	case time.Time:
		return v.UTC()
	case amqp091.Table:
		out := amqp091.Table{}
		for k, f := range v {
			out[k] = normalField(f)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, f := range v {
			out[i] = normalField(f)
		}
		return out
	}
	return v
}
