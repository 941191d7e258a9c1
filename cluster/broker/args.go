package broker

import (
	"fmt"
	"reflect"

	"github.com/warrenmq/warren/amqp/wire"
)

// typeName and asInt are the field-table helpers of the amqp package.
var (
	typeName = wire.TypeName
	asInt    = wire.IntValue
)

func argEqual(a, b any) bool {
	if x, ok := asInt(a); ok {
		y, ok := asInt(b)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

// describeArg renders a value as RabbitMQ's equivalence errors do:
// "the value '1000' of type 'long'", or "none" when absent.
func describeArg(v any, present bool) string {
	if !present {
		return "none"
	}
	switch s := v.(type) {
	case string:
		return fmt.Sprintf("the value '%s' of type '%s'", s, typeName(v))
	case []byte:
		return fmt.Sprintf("the value '%s' of type '%s'", s, typeName(v))
	}
	return fmt.Sprintf("the value '%v' of type '%s'", v, typeName(v))
}

// typeClass groups field types as RabbitMQ's rabbit_misc:type_class does:
// every integer width (and decimal) is "int", both float widths "float",
// anything else its own class.
func typeClass(v any) string {
	if _, ok := asInt(v); ok {
		return "int"
	}
	switch v.(type) {
	case wire.Decimal:
		return "int"
	case float32, float64:
		return "float"
	}
	return typeName(v)
}

// bareArg renders a value as RabbitMQ does when both sides have the same
// type class: just the value, quoted.
func bareArg(v any) string {
	if b, ok := v.([]byte); ok {
		return "'" + string(b) + "'"
	}
	return fmt.Sprintf("'%v'", v)
}

// argMismatch is RabbitMQ's equivalence error for argument k
// (rabbit_misc:assert_args_equivalence1): when both values are present
// and of the same type class they are printed bare ("received '2000' but
// current is '1000'"), otherwise with their types, or "none" for a
// missing one.
func argMismatch(k, what string, got any, gotOK bool, have any, haveOK bool) error {
	if gotOK && haveOK && typeClass(got) == typeClass(have) {
		return wire.Errorf(wire.PreconditionFailed, "inequivalent arg '%s' for %s: received %s but current is %s",
			k, what, bareArg(got), bareArg(have))
	}
	return wire.Errorf(wire.PreconditionFailed, "inequivalent arg '%s' for %s: received %s but current is %s",
		k, what, describeArg(got, gotOK), describeArg(have, haveOK))
}

// checkArgsEquivalent compares the named arguments of a redeclaration
// with the existing entity's, as RabbitMQ does: only arguments that
// change behaviour are compared; unknown ones are ignored.
func checkArgsEquivalent(what string, keys []string, got, have wire.Table) error {
	for _, k := range keys {
		g, gok := got[k]
		h, hok := have[k]
		if gok != hok || (gok && !argEqual(g, h)) {
			return argMismatch(k, what, g, gok, h, hok)
		}
	}
	return nil
}

// inequivalent is the error for a differing declare property such as
// durable or type.
func inequivalent(prop, what string, got, have any) error {
	return wire.Errorf(wire.PreconditionFailed, "inequivalent arg '%s' for %s: received '%v' but current is '%v'", prop, what, got, have)
}

// intArg reads a non-negative integer argument, refusing other types as
// RabbitMQ does.
func intArg(what string, args wire.Table, key string, min int64) (int64, bool, error) {
	v, ok := args[key]
	if !ok {
		return 0, false, nil
	}
	n, isInt := asInt(v)
	if !isInt {
		return 0, false, wire.Errorf(wire.PreconditionFailed, "invalid arg '%s' for %s: {unacceptable_type,%s}", key, what, typeName(v))
	}
	if n < min {
		return 0, false, wire.Errorf(wire.PreconditionFailed, "invalid arg '%s' for %s: {value_negative,%d}", key, what, n)
	}
	return n, true, nil
}

// encodeTable encodes args for the metadata store and for binding
// identity. A nil or empty table encodes to nil.
func encodeTable(t wire.Table) ([]byte, error) {
	if len(t) == 0 {
		return nil, nil
	}
	b, err := wire.AppendTable(nil, t)
	if err != nil {
		return nil, wire.Errorf(wire.PreconditionFailed, "invalid arguments table: %v", err)
	}
	return b, nil
}

func decodeTable(b []byte) (wire.Table, error) {
	if len(b) == 0 {
		return nil, nil
	}
	t, _, err := wire.DecodeTable(b)
	return t, err
}
