package wire

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"
)

// allMethods returns a zero value of every generated method, found by asking newMethod about
// every id pair the spec could plausibly use.
func allMethods() []Method {
	var ms []Method
	for c := range 256 {
		for m := range 256 {
			if mt := newMethod(uint16(c), uint16(m)); mt != nil {
				ms = append(ms, mt)
			}
		}
	}
	return ms
}

// sampleTable holds one value of every field type, nested tables and arrays included, with its
// keys in sorted order so that it re-encodes byte for byte.
func sampleTable() Table {
	return Table{
		"array":   []any{int32(1), "two", []any{true, nil}, Table{"in": uint8(3)}},
		"bool":    true,
		"bytes":   []byte{0, 1, 0xFF},
		"decimal": Decimal{Scale: 2, Value: -12345},
		"float32": float32(1.5),
		"float64": math.Pi,
		"int16":   int16(-300),
		"int32":   int32(-70000),
		"int64":   int64(-1 << 40),
		"int8":    int8(-5),
		"string":  "héllo",
		"table":   Table{"deeper": Table{"x": "y"}, "n": uint32(7)},
		"time":    time.Unix(1700000000, 0).UTC(),
		"uint16":  uint16(65000),
		"uint32":  uint32(4000000000),
		"uint8":   uint8(200),
		"void":    nil,
	}
}

// fillMethod sets every field of m to a non-zero value derived from seed. Bits alternate with
// seed so that two seeds between them set every bit both ways.
func fillMethod(t testing.TB, m Method, seed int) {
	t.Helper()
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		n := seed*100 + i + 1
		switch f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprintf("%s-%d", name, n))
		case reflect.Bool:
			f.SetBool((i+seed)%2 == 0)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(n))
		case reflect.Map:
			tbl := sampleTable()
			tbl["field"] = name
			f.Set(reflect.ValueOf(tbl))
		default:
			t.Fatalf("%s.%s: no filler for %s", m.Name(), name, f.Kind())
		}
	}
}

// hasNaN reports whether a decoded value holds a NaN, which no value equals, so that
// comparisons fall back to comparing encodings.
func hasNaN(v any) bool {
	switch v := v.(type) {
	case float32:
		return v != v
	case float64:
		return v != v
	case Table:
		for _, x := range v {
			if hasNaN(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasNaN(x) {
				return true
			}
		}
	}
	return false
}

// methodHasNaN reports whether any table in m holds a NaN.
func methodHasNaN(m Method) bool {
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		if t, ok := v.Field(i).Interface().(Table); ok && hasNaN(t) {
			return true
		}
	}
	return false
}

func mustAppendMethod(t testing.TB, m Method) []byte {
	t.Helper()
	b, err := AppendMethod(nil, m)
	if err != nil {
		t.Fatalf("AppendMethod(%s): %v", m.Name(), err)
	}
	return b
}

func mustAppendTable(t testing.TB, tbl Table) []byte {
	t.Helper()
	b, err := AppendTable(nil, tbl)
	if err != nil {
		t.Fatalf("AppendTable: %v", err)
	}
	return b
}

// frameBytes builds a raw frame by hand, independent of Writer.
func frameBytes(typ uint8, channel uint16, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteByte(typ)
	b.Write([]byte{byte(channel >> 8), byte(channel)})
	n := len(payload)
	b.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	b.Write(payload)
	b.WriteByte(FrameEnd)
	return b.Bytes()
}

// wantCode fails unless err is an *Error with the given code.
func wantCode(t testing.TB, err error, code uint16) *Error {
	t.Helper()
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("got error %v (%T), want *Error with code %d", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("got code %d (%s), want %d", e.Code, e.Text, code)
	}
	return e
}
