package broker

import (
	"reflect"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
)

// headersMatch is a headers-exchange binding's arguments, compiled: the
// x-match mode and the (key, value) pairs the message headers are matched
// against, as RabbitMQ 4.3's rabbit_exchange_type_headers does:
//
//   - x-match is all (the default), any, all-with-x or any-with-x;
//   - x-match itself never takes part, and other keys starting with "x-"
//     only with the -with-x modes;
//   - all: every pair must be in the headers (so no pairs match every
//     message); any: at least one (so no pairs match none);
//   - a pair whose value is void matches when the key is present, with any
//     value; otherwise the values must be equal, compared by value, not
//     type (RabbitMQ's ==: 1 as a short equals 1 as a long).
type headersMatch struct {
	any   bool
	pairs []headerPair
}

type headerPair struct {
	key   string
	value any
	void  bool
}

// validateHeadersBinding checks a headers binding's x-match argument,
// as rabbit_exchange_type_headers:validate_binding/2 does.
func validateHeadersBinding(args wire.Table) error {
	_, err := compileHeadersMatch(args)
	return err
}

// compileHeadersMatch compiles binding arguments. An invalid x-match is
// an error (406 when binding); the matcher returned with it treats it as
// all, as RabbitMQ does for bindings it did not validate.
func compileHeadersMatch(args wire.Table) (*headersMatch, error) {
	m := &headersMatch{}
	withX := false
	var err error
	if v, ok := args["x-match"]; ok {
		switch s := v.(type) {
		case string:
			switch s {
			case "all":
			case "any":
				m.any = true
			case "all-with-x":
				withX = true
			case "any-with-x":
				m.any, withX = true, true
			default:
				err = wire.Errorf(wire.PreconditionFailed, "Invalid x-match field value <<\"%s\">>; expected all, any, all-with-x, or any-with-x", s)
			}
		default:
			err = wire.Errorf(wire.PreconditionFailed, "Invalid x-match field type %s (value %v); expected longstr", typeName(v), v)
		}
	}
	for k, v := range args {
		if k == "x-match" || (!withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		m.pairs = append(m.pairs, headerPair{key: k, value: v, void: v == nil})
	}
	return m, err
}

// match reports whether message headers h match.
func (m *headersMatch) match(h wire.Table) bool {
	if m == nil {
		return false
	}
	for i := range m.pairs {
		p := &m.pairs[i]
		v, ok := h[p.key]
		hit := ok && (p.void || headerValueEqual(p.value, v))
		if m.any && hit {
			return true
		}
		if !m.any && !hit {
			return false
		}
	}
	return !m.any
}

// headerValueEqual compares field values as Erlang's == compares
// RabbitMQ's decoded values: numbers by value whatever their width or
// kind, timestamps as the integer seconds they are, longstr and
// bytearray as the binaries they both are; tables and arrays exactly.
func headerValueEqual(a, b any) bool {
	if x, ok := asInt(a); ok {
		if y, ok := asInt(b); ok {
			return x == y
		}
	}
	if x, ok := numberValue(a); ok {
		y, ok := numberValue(b)
		return ok && x == y
	}
	if x, ok := binaryValue(a); ok {
		y, ok := binaryValue(b)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

func numberValue(v any) (float64, bool) {
	if n, ok := asInt(v); ok {
		return float64(n), true
	}
	switch n := v.(type) {
	case float32:
		return float64(n), true
	case float64:
		return n, true
	case time.Time:
		return float64(n.Unix()), true
	}
	return 0, false
}

func binaryValue(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}
