package gen

import "strings"

func emitConstants(e *emitter, m *model) {
	e.line("")
	e.line("// Frame types, the frame-end octet and the smallest frame max a peer may ask for.")
	e.line("const (")
	for _, k := range m.frameConstants {
		e.line("%s = %d", k.goName, k.value)
	}
	e.line(")")

	e.line("")
	e.line("// Reply codes of connection.close and channel.close.")
	e.line("const (")
	for _, k := range m.replyCodes {
		e.line("%s = %d", k.goName, k.value)
	}
	e.line(")")

	e.line("")
	e.line("// Class ids.")
	e.line("const (")
	for _, c := range m.classes {
		e.line("Class%s = %d", c.goName, c.id)
	}
	e.line(")")
}

func emitLookups(e *emitter, m *model) {
	e.line("")
	e.line("// ReplyName returns the spec's name for a reply code as RabbitMQ writes it in reply-text,")
	e.line(`// such as "PRECONDITION_FAILED", or the code in decimal when the spec does not define it.`)
	e.line("func ReplyName(code uint16) string {")
	e.line("switch code {")
	for _, k := range m.replyCodes {
		e.line("case %s:", k.goName)
		e.line("return %q", strings.ReplaceAll(k.specName, "-", "_"))
	}
	e.line("}")
	e.line("return strconv.Itoa(int(code))")
	e.line("}")

	e.line("")
	e.line("// IsHardCode reports whether the spec classes a reply code as a hard error, one that closes")
	e.line("// the connection rather than a channel. Codes it does not class as errors are not hard.")
	e.line("func IsHardCode(code uint16) bool {")
	var hard []string
	for _, k := range m.replyCodes {
		if k.class == "hard-error" {
			hard = append(hard, k.goName)
		}
	}
	if len(hard) > 0 {
		e.line("switch code {")
		e.line("case %s:", strings.Join(hard, ", "))
		e.line("return true")
		e.line("}")
	}
	e.line("return false")
	e.line("}")

	e.line("")
	e.line(`// MethodName returns the spec's name of a method, such as "basic.publish", or "" if the`)
	e.line("// spec has no such method.")
	e.line("func MethodName(classID, methodID uint16) string {")
	emitMethodSwitch(e, m, func(mt *method) { e.line("return %q", mt.fullName) })
	e.line(`return ""`)
	e.line("}")

	e.line("")
	e.line("// newMethod returns a zero method struct to decode into, or nil for an unknown method.")
	e.line("func newMethod(classID, methodID uint16) Method {")
	emitMethodSwitch(e, m, func(mt *method) { e.line("return new(%s)", mt.goName) })
	e.line("return nil")
	e.line("}")
}

// emitMethodSwitch emits a switch on classID then methodID with body for each known method.
func emitMethodSwitch(e *emitter, m *model, body func(*method)) {
	e.line("switch classID {")
	for _, c := range m.classes {
		e.line("case Class%s:", c.goName)
		e.line("switch methodID {")
		for _, mt := range c.methods {
			e.line("case %d:", mt.id)
			body(mt)
		}
		e.line("}")
	}
	e.line("}")
}
