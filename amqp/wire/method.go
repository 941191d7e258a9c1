package wire

import "encoding/binary"

// Method is one AMQP method: a pointer to one of the structs generated from the spec.
type Method interface {
	ClassID() uint16
	MethodID() uint16
	Name() string      // the spec's name, "basic.publish"
	Synchronous() bool // whether the peer answers with a -ok method
	HasContent() bool  // basic.publish, basic.return, basic.deliver, basic.get-ok

	// AppendArgs appends the encoded arguments, without the class and method ids. It fails for
	// a short string over 255 bytes or a table value of a type AMQP cannot carry; buf then comes
	// back unchanged.
	AppendArgs(buf []byte) ([]byte, error)

	// decodeArgs sets the fields from the encoded arguments; it also keeps Method closed to
	// the generated structs.
	decodeArgs(args []byte) error
}

// DecodeMethod decodes a method frame's payload: class id, method id, arguments.
//
// The reply codes are RabbitMQ's where it has one. Arguments that do not decode, including
// trailing bytes and malformed UTF-8 in the short strings RabbitMQ checks, are FRAME_ERROR:
// rabbit_framing_amqp_0_9_1:decode_method_fields falls through to rabbit_misc:frame_error
// ("cannot decode"). For an unknown class or method RabbitMQ sends no reply at all:
// lookup_method_name exits with unknown_method_id, the connection process dies and the client
// sees the socket reset. We answer NOT_IMPLEMENTED instead, so the client learns why.
// rabbitmq_test.go checks these against a running RabbitMQ.
func DecodeMethod(payload []byte) (Method, error) {
	if len(payload) < 4 {
		return nil, Errorf(FrameError, "method frame payload of %d bytes has no class and method id", len(payload))
	}
	classID := binary.BigEndian.Uint16(payload)
	methodID := binary.BigEndian.Uint16(payload[2:])
	m := newMethod(classID, methodID)
	if m == nil {
		return nil, methodError(NotImplemented, classID, methodID, "unknown method: class %d, method %d", classID, methodID)
	}
	if err := m.decodeArgs(payload[4:]); err != nil {
		return nil, methodError(FrameError, classID, methodID, "cannot decode %s: %v", m.Name(), err)
	}
	return m, nil
}

// AppendMethod appends a method frame's payload: class id, method id, arguments. On error buf
// comes back unchanged.
func AppendMethod(buf []byte, m Method) ([]byte, error) {
	out := binary.BigEndian.AppendUint16(buf, m.ClassID())
	out = binary.BigEndian.AppendUint16(out, m.MethodID())
	out, err := m.AppendArgs(out)
	if err != nil {
		return buf, err
	}
	return out, nil
}
