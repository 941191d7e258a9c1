package gen

import "strings"

// nonZero is the test for "this property has a value worth sending" per wire type.
var nonZero = map[string]string{
	"octet":     "!= 0",
	"short":     "!= 0",
	"long":      "!= 0",
	"longlong":  "!= 0",
	"timestamp": "!= 0",
	"shortstr":  `!= ""`,
	"longstr":   `!= ""`,
	"table":     "!= nil",
}

func emitProperties(e *emitter, props []field) {
	e.line("")
	e.line("// Properties are the content properties of a content header (only the basic class has")
	e.line("// content). Flags holds the presence bits as decoded; when encoding, a property is written")
	e.line("// if its flag is set or its value is not zero.")
	e.line("type Properties struct {")
	e.line("Flags uint16")
	for _, p := range props {
		e.line("%s %s", p.goName, goTypes[p.wireType])
	}
	e.line("}")

	// The first property is the top bit of the flags word; bit 0 would announce another word.
	e.line("")
	e.line("// Property flags: which properties a content header carries.")
	e.line("const (")
	var all []string
	for i, p := range props {
		e.line("Flag%s uint16 = 0x%04X", p.goName, 0x8000>>i)
		all = append(all, "Flag"+p.goName)
	}
	e.line(")")
	e.line("")
	e.line("// propertyFlags are the flags the spec defines; the bits below them are padding and the")
	e.line("// continuation flag, which RabbitMQ ignores.")
	e.line("const propertyFlags = %s", strings.Join(all, " | "))

	e.line("")
	e.line("// presentFlags returns the flags word to encode: the flags set, plus those of non-zero values.")
	e.line("func (p *Properties) presentFlags() uint16 {")
	e.line("flags := p.Flags & propertyFlags")
	for _, p := range props {
		e.line("if p.%s %s {", p.goName, nonZero[p.wireType])
		e.line("flags |= Flag%s", p.goName)
		e.line("}")
	}
	e.line("return flags")
	e.line("}")

	e.line("")
	e.line("// appendTo appends the flags word and the present properties.")
	e.line("func (p *Properties) appendTo(buf []byte) ([]byte, error) {")
	e.line("start := len(buf)")
	e.line("var err error")
	e.line("flags := p.presentFlags()")
	e.line("buf = binary.BigEndian.AppendUint16(buf, flags)")
	for _, p := range props {
		e.line("if flags&Flag%s != 0 {", p.goName)
		switch p.wireType {
		case "octet":
			e.line("buf = append(buf, p.%s)", p.goName)
		case "short", "long", "longlong", "timestamp":
			e.line("buf = %s(buf, p.%s)", appendFixed[p.wireType], p.goName)
		default:
			e.line("if buf, err = %s(buf, p.%s); err != nil {", appendVariable[p.wireType], p.goName)
			e.line("return buf[:start], propertyError(%q, err)", p.name)
			e.line("}")
		}
		e.line("}")
	}
	e.line("return buf, nil")
	e.line("}")

	e.line("")
	e.line("// decode reads the flags word and the properties it announces.")
	e.line("func (p *Properties) decode(d *decoder) {")
	e.line("flags := d.short() & propertyFlags")
	e.line("p.Flags = flags")
	for _, p := range props {
		e.line("if flags&Flag%s != 0 {", p.goName)
		e.line("p.%s = %s", p.goName, decodeCalls[p.wireType])
		e.line("}")
	}
	e.line("}")
}
