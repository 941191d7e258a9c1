package gen

import (
	"fmt"
	"strings"
)

func emitMethod(e *emitter, mt *method) {
	traits := ""
	switch {
	case mt.content:
		traits = "; it carries content"
	case mt.synchronous:
		traits = "; it is synchronous"
	}
	e.line("")
	e.line("// %s is the %s method (class %d, method %d)%s.", mt.goName, mt.fullName, mt.class.id, mt.id, traits)
	e.line("type %s struct {", mt.goName)
	for _, f := range mt.args {
		if f.reserved {
			e.line("// %s: reserved in AMQP 0-9-1, always written as zero", f.name)
			continue
		}
		if f.comment != "" {
			e.line("%s %s // %s", f.goName, goTypes[f.wireType], f.comment)
			continue
		}
		e.line("%s %s", f.goName, goTypes[f.wireType])
	}
	e.line("}")
	e.line("")
	e.line("func (*%s) ClassID() uint16 { return %d }", mt.goName, mt.class.id)
	e.line("func (*%s) MethodID() uint16 { return %d }", mt.goName, mt.id)
	e.line("func (*%s) Name() string { return %q }", mt.goName, mt.fullName)
	e.line("func (*%s) Synchronous() bool { return %t }", mt.goName, mt.synchronous)
	e.line("func (*%s) HasContent() bool { return %t }", mt.goName, mt.content)
	emitAppendArgs(e, mt)
	emitDecodeArgs(e, mt)
}

// usesFields reports whether the generated code reads the struct's fields at all.
func usesFields(mt *method) bool {
	for _, f := range mt.args {
		if !f.reserved {
			return true
		}
	}
	return false
}

// mayFail reports whether encoding can fail: strings can be too long, tables can hold
// unsupported values.
func mayFail(mt *method) bool {
	for _, f := range mt.args {
		if !f.reserved && (f.wireType == "shortstr" || f.wireType == "longstr" || f.wireType == "table") {
			return true
		}
	}
	return false
}

// bitGroups splits arguments into runs: consecutive bits share octets, up to eight each, and
// any other argument stands alone.
func bitGroups(args []field) [][]field {
	var groups [][]field
	for i := 0; i < len(args); {
		j := i + 1
		if args[i].wireType == "bit" {
			for j < len(args) && args[j].wireType == "bit" && j-i < 8 {
				j++
			}
		}
		groups = append(groups, args[i:j])
		i = j
	}
	return groups
}

var zeroBytes = map[string]string{
	"octet":     "0",
	"short":     "0, 0",
	"long":      "0, 0, 0, 0",
	"longlong":  "0, 0, 0, 0, 0, 0, 0, 0",
	"timestamp": "0, 0, 0, 0, 0, 0, 0, 0",
	"shortstr":  "0",
	"longstr":   "0, 0, 0, 0",
	"table":     "0, 0, 0, 0",
}

var appendFixed = map[string]string{
	"short":     "binary.BigEndian.AppendUint16",
	"long":      "binary.BigEndian.AppendUint32",
	"longlong":  "binary.BigEndian.AppendUint64",
	"timestamp": "binary.BigEndian.AppendUint64",
}

var appendVariable = map[string]string{
	"shortstr": "appendShortstr",
	"longstr":  "appendLongstr",
	"table":    "AppendTable",
}

func emitAppendArgs(e *emitter, mt *method) {
	recv := "*" + mt.goName
	if usesFields(mt) {
		recv = "m " + recv
	}
	e.line("")
	e.line("func (%s) AppendArgs(buf []byte) ([]byte, error) {", recv)
	if mayFail(mt) {
		e.line("start := len(buf)")
		e.line("var err error")
	}
	for _, g := range bitGroups(mt.args) {
		f := g[0]
		switch {
		case f.wireType == "bit":
			var terms []string
			for i, b := range g {
				if !b.reserved {
					terms = append(terms, fmt.Sprintf("bit(m.%s, %d)", b.goName, i))
				}
			}
			if len(terms) == 0 {
				e.line("buf = append(buf, 0) // %s: reserved", names(g))
				continue
			}
			e.line("buf = append(buf, %s)", strings.Join(terms, "|"))
		case f.reserved:
			e.line("buf = append(buf, %s) // %s: reserved", zeroBytes[f.wireType], f.name)
		case f.wireType == "octet":
			e.line("buf = append(buf, m.%s)", f.goName)
		case appendFixed[f.wireType] != "":
			e.line("buf = %s(buf, m.%s)", appendFixed[f.wireType], f.goName)
		default:
			e.line("if buf, err = %s(buf, m.%s); err != nil {", appendVariable[f.wireType], f.goName)
			e.line("return buf[:start], argError(%q, %q, err)", mt.fullName, f.name)
			e.line("}")
		}
	}
	e.line("return buf, nil")
	e.line("}")
}

// decodeCalls are the decoder methods that read each wire type.
var decodeCalls = map[string]string{
	"octet":     "d.octet()",
	"short":     "d.short()",
	"long":      "d.long()",
	"longlong":  "d.longlong()",
	"timestamp": "d.longlong()",
	"shortstr":  "d.shortstr()",
	"longstr":   "d.longstr()",
	"table":     "d.table()",
}

func emitDecodeArgs(e *emitter, mt *method) {
	recv := "*" + mt.goName
	if usesFields(mt) {
		recv = "m " + recv
	}
	e.line("")
	e.line("func (%s) decodeArgs(args []byte) error {", recv)
	e.line("d := decoder{rest: args}")
	bitsDeclared := false
	for _, g := range bitGroups(mt.args) {
		f := g[0]
		if f.wireType == "bit" {
			if !usesFields(&method{args: g}) {
				e.line("_ = d.octet() // %s: reserved", names(g))
				continue
			}
			op := "="
			if !bitsDeclared {
				op, bitsDeclared = ":=", true
			}
			e.line("bits %s d.octet()", op)
			for i, b := range g {
				if !b.reserved {
					e.line("m.%s = bits&(1<<%d) != 0", b.goName, i)
				}
			}
			continue
		}
		call := decodeCalls[f.wireType]
		// RabbitMQ checks that short strings are UTF-8 except in the methods that carry content,
		// to keep publishing and delivery fast (rabbit_common codegen.py); so do we.
		if f.wireType == "shortstr" && !mt.content {
			call = "d.shortstrUTF8()"
		}
		if f.reserved {
			e.line("_ = %s // %s: reserved", call, f.name)
		} else {
			e.line("m.%s = %s", f.goName, call)
		}
	}
	e.line("return d.finish()")
	e.line("}")
}

// names lists the spec names of some arguments for a comment.
func names(fields []field) string {
	var n []string
	for _, f := range fields {
		n = append(n, f.name)
	}
	return strings.Join(n, ", ")
}
