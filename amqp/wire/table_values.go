package wire

import (
	"fmt"
	"time"
)

// IntValue returns an integer-typed field value as int64, whatever its
// width: RabbitMQ treats every integer type alike in arguments (its
// ?INTEGER_ARG_TYPES) and compares them by value.
func IntValue(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case uint8:
		return int64(n), true
	case int16:
		return int64(n), true
	case uint16:
		return int64(n), true
	case int32:
		return int64(n), true
	case uint32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

// TypeName is RabbitMQ's name for a field value's type, as its argument
// errors print it ("signedint", "longstr", ...).
func TypeName(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case int8:
		return "byte"
	case uint8:
		return "unsignedbyte"
	case int16:
		return "short"
	case uint16:
		return "unsignedshort"
	case int32:
		return "signedint"
	case uint32:
		return "unsignedint"
	case int64, int:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case Decimal:
		return "decimal"
	case string:
		return "longstr"
	case []byte:
		return "binary"
	case []any:
		return "array"
	case time.Time:
		return "timestamp"
	case Table, map[string]any:
		return "table"
	case nil:
		return "void"
	}
	return fmt.Sprintf("%T", v)
}
