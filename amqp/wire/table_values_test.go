package wire

import (
	"testing"
	"time"
)

func TestIntValueAndTypeName(t *testing.T) {
	for _, v := range []any{int8(-3), uint8(3), int16(-3), uint16(3), int32(-3), uint32(3), int64(-3), int(3)} {
		n, ok := IntValue(v)
		if !ok || (n != 3 && n != -3) {
			t.Errorf("IntValue(%T %v) = %d, %v", v, v, n, ok)
		}
	}
	for _, v := range []any{"3", 3.0, true, nil} {
		if _, ok := IntValue(v); ok {
			t.Errorf("IntValue(%T) accepted", v)
		}
	}
	names := map[string]any{
		"signedint": int32(1), "long": int64(1), "longstr": "x", "bool": true, "timestamp": time.Time{},
		"table": Table{}, "array": []any{}, "void": nil, "binary": []byte{}, "decimal": Decimal{},
	}
	for want, v := range names {
		if got := TypeName(v); got != want {
			t.Errorf("TypeName(%T) = %q, want %q", v, got, want)
		}
	}
}
