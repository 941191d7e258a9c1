package wire

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTableRoundTripsEveryType(t *testing.T) {
	want := sampleTable()
	encoded := mustAppendTable(t, want)
	got, n, err := DecodeTable(encoded)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(encoded) {
		t.Fatalf("consumed %d of %d bytes", n, len(encoded))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip\n got %#v\nwant %#v", got, want)
	}
	if again := mustAppendTable(t, got); !bytes.Equal(again, encoded) {
		t.Fatalf("re-encoding differs")
	}
}

// TestTableWireFormat pins each type's encoding, byte for byte, as RabbitMQ's
// rabbit_binary_parser reads it.
func TestTableWireFormat(t *testing.T) {
	tests := []struct {
		value any
		wire  []byte // after the key
	}{
		{true, []byte{'t', 1}},
		{int8(-1), []byte{'b', 0xFF}},
		{uint8(255), []byte{'B', 0xFF}},
		{int16(-2), []byte{'s', 0xFF, 0xFE}},
		{uint16(0x1234), []byte{'u', 0x12, 0x34}},
		{int32(-3), []byte{'I', 0xFF, 0xFF, 0xFF, 0xFD}},
		{uint32(0x01020304), []byte{'i', 1, 2, 3, 4}},
		{int64(-4), []byte{'l', 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFC}},
		{float32(1), []byte{'f', 0x3F, 0x80, 0, 0}},
		{float64(1), []byte{'d', 0x3F, 0xF0, 0, 0, 0, 0, 0, 0}},
		{Decimal{Scale: 2, Value: 5}, []byte{'D', 2, 0, 0, 0, 5}},
		{"ab", []byte{'S', 0, 0, 0, 2, 'a', 'b'}},
		{[]byte{9}, []byte{'x', 0, 0, 0, 1, 9}},
		{time.Unix(0x0102, 0).UTC(), []byte{'T', 0, 0, 0, 0, 0, 0, 1, 2}},
		{nil, []byte{'V'}},
		{[]any{uint8(1)}, []byte{'A', 0, 0, 0, 2, 'B', 1}},
		{Table{"k": uint8(1)}, []byte{'F', 0, 0, 0, 4, 1, 'k', 'B', 1}},
	}
	for _, tt := range tests {
		encoded := mustAppendTable(t, Table{"k": tt.value})
		want := append([]byte{0, 0, 0, byte(2 + len(tt.wire)), 1, 'k'}, tt.wire...)
		if !bytes.Equal(encoded, want) {
			t.Errorf("%T %v: got % x, want % x", tt.value, tt.value, encoded, want)
			continue
		}
		got, _, err := DecodeTable(encoded)
		if err != nil || !reflect.DeepEqual(got["k"], tt.value) {
			t.Errorf("%T %v: decoded %#v, %v", tt.value, tt.value, got["k"], err)
		}
	}
}

func TestTableEncodesConvenienceTypes(t *testing.T) {
	tests := []struct {
		in   any
		want any // decoded
	}{
		{42, int64(42)},
		{-42, int64(-42)},
		{uint64(math.MaxInt64), int64(math.MaxInt64)},
		{map[string]any{"a": "b"}, Table{"a": "b"}},
	}
	for _, tt := range tests {
		got, _, err := DecodeTable(mustAppendTable(t, Table{"k": tt.in}))
		if err != nil || !reflect.DeepEqual(got["k"], tt.want) {
			t.Errorf("%T %v decoded as %#v, %v", tt.in, tt.in, got["k"], err)
		}
	}
}

func TestTableDecodesCapitalLAsInt64(t *testing.T) {
	// RabbitMQ reads 'L' like 'l' (rabbit_binary_parser; see the 0-9-1 errata).
	got, _, err := DecodeTable([]byte{0, 0, 0, 11, 1, 'k', 'L', 0, 0, 0, 0, 0, 0, 0, 7})
	if err != nil || got["k"] != int64(7) {
		t.Fatalf("got %#v, %v", got, err)
	}
}

func TestTableEncodingErrors(t *testing.T) {
	self := Table{}
	self["me"] = self
	tests := []struct {
		name  string
		table Table
		want  error
	}{
		{"unsupported type", Table{"k": struct{}{}}, errUnsupportedType},
		{"uint", Table{"k": uint(1)}, errUnsupportedType},
		{"nested unsupported", Table{"k": []any{Table{"j": complex(1, 1)}}}, errUnsupportedType},
		{"uint64 too big", Table{"k": uint64(math.MaxInt64) + 1}, errOutOfRange},
		{"long key", Table{strings.Repeat("k", 256): 1}, errShortstrTooLong},
		{"table containing itself", self, errNestedTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := []byte{1, 2}
			out, err := AppendTable(buf, tt.table)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if !bytes.Equal(out, []byte{1, 2}) {
				t.Fatalf("buf changed on error: % x", out)
			}
		})
	}
}

func TestTableKeysAreSorted(t *testing.T) {
	a := mustAppendTable(t, Table{"b": 1, "a": 2, "c": 3, "aa": 4})
	for range 20 {
		if b := mustAppendTable(t, Table{"c": 3, "aa": 4, "a": 2, "b": 1}); !bytes.Equal(a, b) {
			t.Fatal("encoding depends on map order")
		}
	}
	if !bytes.Equal(a[4:7], []byte{1, 'a', 'l'}) {
		t.Fatalf("first key is not \"a\": % x", a[:8])
	}
}

func TestEmptyTableDecodesNil(t *testing.T) {
	got, n, err := DecodeTable([]byte{0, 0, 0, 0, 0xAA})
	if err != nil || got != nil || n != 4 {
		t.Fatalf("got %#v, %d, %v", got, n, err)
	}
}

func TestDecodeTableRejectsHostileInput(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"no length", []byte{0, 0}},
		{"length past end", []byte{0, 0, 0, 9, 1, 'k', 'V'}},
		{"huge length", []byte{0xFF, 0xFF, 0xFF, 0xFF}},
		{"key past end", []byte{0, 0, 0, 2, 9, 'k'}},
		{"no type", []byte{0, 0, 0, 2, 1, 'k'}},
		{"unknown type", []byte{0, 0, 0, 3, 1, 'k', '?'}},
		{"shortstr type is not a string", []byte{0, 0, 0, 4, 1, 'k', 's', 0}},
		{"string past end", []byte{0, 0, 0, 7, 1, 'k', 'S', 0x7F, 0xFF, 0xFF, 0xFF}},
		{"nested table past its parent", []byte{0, 0, 0, 7, 1, 'k', 'F', 0, 0, 0, 9}},
		{"array element truncated", []byte{0, 0, 0, 9, 1, 'k', 'A', 0, 0, 0, 2, 'I', 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := DecodeTable(tt.data)
			wantCode(t, err, FrameError)
		})
	}
}

// nestedArrays returns an encoded table holding arrays nested depth deep.
func nestedArrays(depth int) []byte {
	inner := []byte{} // an empty array body
	for range depth - 1 {
		n := len(inner)
		inner = append([]byte{'A', byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, inner...)
	}
	body := append([]byte{1, 'k', 'A', 0, 0, 0, 0}, inner...)
	n := len(inner)
	body[3], body[4], body[5], body[6] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	n = len(body)
	return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

func TestDecodeTableBoundsNesting(t *testing.T) {
	// The table is level 1, so maxFieldNesting-1 arrays fit inside it.
	if _, _, err := DecodeTable(nestedArrays(maxFieldNesting - 1)); err != nil {
		t.Fatalf("%d levels: %v", maxFieldNesting, err)
	}
	_, _, err := DecodeTable(nestedArrays(100))
	e := wantCode(t, err, FrameError)
	if !strings.Contains(e.Text, "nested too deeply") {
		t.Fatalf("text %q", e.Text)
	}
}

func TestDecodeTableAllocatesInProportionToInput(t *testing.T) {
	// A table that claims a 2 GiB string but carries 4 bytes must fail without allocating it.
	data := []byte{0, 0, 0, 11, 1, 'k', 'S', 0x7F, 0xFF, 0xFF, 0xFF, 'a', 'b', 'c', 'd'}
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := DecodeTable(data); err == nil {
			t.Fatal("decoded")
		}
	})
	if allocs > 10 {
		t.Fatalf("%v allocations for a 15-byte input", allocs)
	}
}

func TestAppendTableDoesNotAllocateForSmallTables(t *testing.T) {
	tbl := Table{"x-match": "all", "format": "pdf", "n": int32(1), "ok": true}
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := AppendTable(buf, tbl); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}
