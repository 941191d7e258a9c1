package wire

// Table is an AMQP field table: the arguments of declarations and bindings, message headers,
// and the peer properties exchanged at connection start.
//
// Field types follow RabbitMQ (the 0-9-1 errata, not the spec's own list), decoded to:
//
//	't' bool      'b' int8     'B' uint8    's' int16    'u' uint16
//	'I' int32     'i' uint32   'l' int64    'f' float32  'd' float64
//	'D' Decimal   'S' string   'A' []any    'T' time.Time (UTC, whole seconds)
//	'F' Table     'V' nil      'x' []byte
//
// RabbitMQ also reads 'L' as a signed 64-bit integer; so does DecodeTable (it re-encodes as 'l').
// Note 's' is a signed short, not the short string the spec's table shows.
//
// Encoding takes the same Go types, so a decoded table re-encodes byte for byte (keys are
// written in sorted order, so a table whose keys were sorted on the wire does), and also int
// and uint64 (as 'l'; a uint64 above math.MaxInt64 is an error) and map[string]any (as 'F').
// Any other type is an error. Empty tables and arrays decode as nil.
type Table map[string]any

// Decimal is a field table decimal: Value / 10^Scale.
type Decimal struct {
	Scale uint8
	Value int32
}

// maxFieldNesting bounds how deeply tables and arrays may nest, in both directions: RabbitMQ
// has no limit, but real headers nest a few levels while hostile ones could exhaust the
// stack, and encoding must not recurse forever on a table that contains itself.
const maxFieldNesting = 64
