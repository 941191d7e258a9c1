package wire

import "encoding/binary"

// ContentHeader is the payload of a content header frame, which follows a method that carries
// content and announces the body's size and the message properties.
type ContentHeader struct {
	ClassID    uint16
	BodySize   uint64
	Properties Properties
}

// DecodeContentHeader decodes a content header frame's payload.
//
// A header that does not decode, or has bytes left over, is FRAME_ERROR, as RabbitMQ answers a
// header frame too short to parse (rabbit_command_assembler:analyze_frame returns error and
// rabbit_reader sends frame_error). A non-zero weight, which 0-9-1 requires to be zero, is
// UNEXPECTED_FRAME, as RabbitMQ's command assembler only accepts weight 0 as the header it
// waits for. Property flag bits below the last property (padding, continuation) are ignored,
// as RabbitMQ ignores them.
func DecodeContentHeader(payload []byte) (ContentHeader, error) {
	var h ContentHeader
	d := decoder{rest: payload}
	h.ClassID = d.short()
	weight := d.short()
	h.BodySize = d.longlong()
	h.Properties.decode(&d)
	if err := d.finish(); err != nil {
		return ContentHeader{}, Errorf(FrameError, "cannot decode content header: %v", err)
	}
	if weight != 0 {
		return ContentHeader{}, Errorf(UnexpectedFrame, "content header weight %d, must be 0", weight)
	}
	return h, nil
}

// AppendContentHeader appends a content header frame's payload. On error (a property too long
// or a header value AMQP cannot carry) buf comes back unchanged.
func AppendContentHeader(buf []byte, h *ContentHeader) ([]byte, error) {
	out := binary.BigEndian.AppendUint16(buf, h.ClassID)
	out = append(out, 0, 0) // weight, always 0 in 0-9-1
	out = binary.BigEndian.AppendUint64(out, h.BodySize)
	out, err := h.Properties.appendTo(out)
	if err != nil {
		return buf, err
	}
	return out, nil
}
