package wire

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"
)

// Why decoding failed. They become the explanation in a FRAME_ERROR's reply-text.
var (
	errTruncated    = errors.New("truncated")
	errTrailing     = errors.New("unexpected bytes after the last field")
	errBadUTF8      = errors.New("malformed UTF-8 in shortstr")
	errTooDeep      = errors.New("field tables and arrays nested too deeply")
	errBadFieldType = errors.New("unknown field value type")
)

// decoder reads AMQP fields from the front of a payload. The first failure sticks and later
// reads return zero values, so generated code reads every field and checks once, at finish.
//
// It is a small value kept on the caller's stack: decoding allocates only what it returns.
type decoder struct {
	rest []byte
	err  error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.rest = nil
}

// take returns the next n bytes without copying them.
func (d *decoder) take(n uint64) ([]byte, bool) {
	if d.err != nil {
		return nil, false
	}
	if n > uint64(len(d.rest)) {
		d.fail(errTruncated)
		return nil, false
	}
	b := d.rest[:n:n]
	d.rest = d.rest[n:]
	return b, true
}

// finish is the error of the whole read: a failure, or bytes nobody read. RabbitMQ's decoder
// matches a method's arguments against the whole payload, so trailing bytes are an error there too.
func (d *decoder) finish() error {
	if d.err == nil && len(d.rest) != 0 {
		d.fail(errTrailing)
	}
	return d.err
}

func (d *decoder) octet() uint8 {
	b, ok := d.take(1)
	if !ok {
		return 0
	}
	return b[0]
}

func (d *decoder) short() uint16 {
	b, ok := d.take(2)
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

func (d *decoder) long() uint32 {
	b, ok := d.take(4)
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func (d *decoder) longlong() uint64 {
	b, ok := d.take(8)
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// shortstrBytes returns a short string's bytes without copying them.
func (d *decoder) shortstrBytes() []byte {
	n := d.octet()
	b, _ := d.take(uint64(n))
	return b
}

func (d *decoder) shortstr() string {
	return string(d.shortstrBytes())
}

// shortstrUTF8 is shortstr for the fields RabbitMQ insists are UTF-8.
func (d *decoder) shortstrUTF8() string {
	b := d.shortstrBytes()
	if !utf8.Valid(b) {
		d.fail(errBadUTF8)
		return ""
	}
	return string(b)
}

// longstrBytes returns a long string's bytes without copying them.
func (d *decoder) longstrBytes() []byte {
	n := d.long()
	b, _ := d.take(uint64(n))
	return b
}

func (d *decoder) longstr() string {
	return string(d.longstrBytes())
}

// table reads a field table argument or property.
func (d *decoder) table() Table {
	return d.tableAt(1)
}
