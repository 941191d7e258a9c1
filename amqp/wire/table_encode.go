package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

var (
	errUnsupportedType = errors.New("unsupported field value type")
	errOutOfRange      = errors.New("uint64 above math.MaxInt64 does not fit a signed 64-bit field")
	errNestedTooDeep   = errors.New("field tables and arrays nested too deeply (a table containing itself?)")
)

// AppendTable appends t with its 4-byte length prefix. Keys are written in sorted order so
// that the same table always encodes to the same bytes. On error buf comes back unchanged.
func AppendTable(buf []byte, t Table) ([]byte, error) {
	return appendTableAt(buf, t, 1)
}

// sortedKeysOnStack is how many keys are sorted without allocating; message headers and
// queue arguments rarely have more.
const sortedKeysOnStack = 16

func appendTableAt(buf []byte, t map[string]any, depth int) ([]byte, error) {
	if depth > maxFieldNesting {
		return buf, errNestedTooDeep
	}
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0) // length, patched below
	var onStack [sortedKeysOnStack]string
	keys := onStack[:0]
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var err error
		if buf, err = appendShortstr(buf, k); err != nil {
			return buf[:start], fmt.Errorf("table key %.32q...: %w", k, err)
		}
		if buf, err = appendFieldValue(buf, t[k], depth); err != nil {
			return buf[:start], fmt.Errorf("table field %q: %w", k, err)
		}
	}
	if err := patchLength(buf, start); err != nil {
		return buf[:start], err
	}
	return buf, nil
}

func appendArrayAt(buf []byte, values []any, depth int) ([]byte, error) {
	if depth > maxFieldNesting {
		return buf, errNestedTooDeep
	}
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0) // length, patched below
	for i, v := range values {
		var err error
		if buf, err = appendFieldValue(buf, v, depth); err != nil {
			return buf[:start], fmt.Errorf("array element %d: %w", i, err)
		}
	}
	if err := patchLength(buf, start); err != nil {
		return buf[:start], err
	}
	return buf, nil
}

// patchLength writes the length of what follows the 4-byte prefix at buf[start:].
func patchLength(buf []byte, start int) error {
	n := len(buf) - start - 4
	if uint64(n) > math.MaxUint32 {
		return errLongstrTooLong
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(n))
	return nil
}

// appendFieldValue appends a type octet and a value, inside a table or array that is depth
// levels deep. On error buf comes back unchanged.
func appendFieldValue(buf []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case bool:
		return append(buf, 't', bit(v, 0)), nil
	case int8:
		return append(buf, 'b', byte(v)), nil
	case uint8:
		return append(buf, 'B', v), nil
	case int16:
		return binary.BigEndian.AppendUint16(append(buf, 's'), uint16(v)), nil
	case uint16:
		return binary.BigEndian.AppendUint16(append(buf, 'u'), v), nil
	case int32:
		return binary.BigEndian.AppendUint32(append(buf, 'I'), uint32(v)), nil
	case uint32:
		return binary.BigEndian.AppendUint32(append(buf, 'i'), v), nil
	case int64:
		return binary.BigEndian.AppendUint64(append(buf, 'l'), uint64(v)), nil
	case int:
		return binary.BigEndian.AppendUint64(append(buf, 'l'), uint64(int64(v))), nil
	case uint64:
		if v > math.MaxInt64 {
			return buf, errOutOfRange
		}
		return binary.BigEndian.AppendUint64(append(buf, 'l'), v), nil
	case float32:
		return binary.BigEndian.AppendUint32(append(buf, 'f'), math.Float32bits(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(buf, 'd'), math.Float64bits(v)), nil
	case Decimal:
		return binary.BigEndian.AppendUint32(append(buf, 'D', v.Scale), uint32(v.Value)), nil
	case string:
		out, err := appendLongstr(append(buf, 'S'), v)
		return restoreOnError(buf, out, err)
	case []byte:
		out, err := appendLongstr(append(buf, 'x'), v)
		return restoreOnError(buf, out, err)
	case time.Time:
		return binary.BigEndian.AppendUint64(append(buf, 'T'), uint64(v.Unix())), nil
	case []any:
		out, err := appendArrayAt(append(buf, 'A'), v, depth+1)
		return restoreOnError(buf, out, err)
	case Table:
		out, err := appendTableAt(append(buf, 'F'), v, depth+1)
		return restoreOnError(buf, out, err)
	case map[string]any:
		out, err := appendTableAt(append(buf, 'F'), v, depth+1)
		return restoreOnError(buf, out, err)
	case nil:
		return append(buf, 'V'), nil
	}
	return buf, fmt.Errorf("%w %T", errUnsupportedType, v)
}

// restoreOnError returns out, or buf as it was before a type octet was appended if the value
// after the octet failed to encode.
func restoreOnError(buf, out []byte, err error) ([]byte, error) {
	if err != nil {
		return buf, err
	}
	return out, nil
}
