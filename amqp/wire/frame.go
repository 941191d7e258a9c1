package wire

// ProtocolHeader is what a client sends first to ask for AMQP 0-9-1.
const ProtocolHeader = "AMQP\x00\x00\x09\x01"

// Limits RabbitMQ offers in connection.tune unless configured otherwise.
const (
	DefaultFrameMax   = 131072
	DefaultChannelMax = 2047
)

// A frame is a 7-octet header (type, channel, payload size), the payload, and the frame-end
// octet; frame max counts all of it.
const (
	frameHeaderSize = 7
	frameOverhead   = frameHeaderSize + 1
)

// Frame is one frame as read from the wire.
type Frame struct {
	Type    uint8
	Channel uint16
	Payload []byte // belongs to the caller: the Reader never reuses it
}
