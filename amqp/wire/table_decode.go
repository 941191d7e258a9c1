package wire

import (
	"bytes"
	"math"
	"time"
)

// DecodeTable decodes a field table from the front of data, which starts at the table's
// 4-byte length, and returns it with the number of bytes it took. A malformed table is an
// *Error with code FrameError, as RabbitMQ treats an undecodable method.
func DecodeTable(data []byte) (Table, int, error) {
	d := decoder{rest: data}
	t := d.table()
	if d.err != nil {
		return nil, 0, Errorf(FrameError, "cannot decode field table: %v", d.err)
	}
	return t, len(data) - len(d.rest), nil
}

// tableAt reads a field table that is depth levels deep (1 at the top).
func (d *decoder) tableAt(depth int) Table {
	body, ok := d.take(uint64(d.long()))
	if !ok {
		return nil
	}
	if depth > maxFieldNesting {
		d.fail(errTooDeep)
		return nil
	}
	if len(body) == 0 {
		return nil
	}
	// No size hint: a count guessed from hostile bytes is exactly what not to allocate by.
	t := make(Table)
	entries := decoder{rest: body}
	for len(entries.rest) > 0 {
		key := entries.shortstr()
		value := entries.fieldValue(depth)
		if entries.err != nil {
			d.fail(entries.err)
			return nil
		}
		t[key] = value
	}
	return t
}

// arrayAt reads a field array that is depth levels deep.
func (d *decoder) arrayAt(depth int) []any {
	body, ok := d.take(uint64(d.long()))
	if !ok {
		return nil
	}
	if depth > maxFieldNesting {
		d.fail(errTooDeep)
		return nil
	}
	var values []any
	items := decoder{rest: body}
	for len(items.rest) > 0 {
		value := items.fieldValue(depth)
		if items.err != nil {
			d.fail(items.err)
			return nil
		}
		values = append(values, value)
	}
	return values
}

// fieldValue reads a type octet and the value it announces, inside a table or array that is
// depth levels deep.
func (d *decoder) fieldValue(depth int) any {
	switch d.octet() {
	case 't':
		return d.octet() != 0
	case 'b':
		return int8(d.octet())
	case 'B':
		return d.octet()
	case 's':
		return int16(d.short())
	case 'u':
		return d.short()
	case 'I':
		return int32(d.long())
	case 'i':
		return d.long()
	case 'l', 'L':
		return int64(d.longlong())
	case 'f':
		return math.Float32frombits(d.long())
	case 'd':
		return math.Float64frombits(d.longlong())
	case 'D':
		scale := d.octet()
		return Decimal{Scale: scale, Value: int32(d.long())}
	case 'S':
		return d.longstr()
	case 'x':
		b := d.longstrBytes()
		if d.err != nil {
			return nil
		}
		return bytes.Clone(b)
	case 'T':
		return time.Unix(int64(d.longlong()), 0).UTC()
	case 'A':
		return d.arrayAt(depth + 1)
	case 'F':
		return d.tableAt(depth + 1)
	case 'V':
		return nil
	}
	d.fail(errBadFieldType)
	return nil
}
