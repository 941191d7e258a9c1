package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"slices"
)

// readBufferSize is the Reader's buffer: large enough that a burst of small frames (publishes,
// acks) costs one read system call.
const readBufferSize = 64 << 10

// eagerPayloadLimit is the largest payload allocated in one piece before any of it arrives.
// Beyond it (only with a frame max above 1 MiB, or none) the payload grows as bytes come in,
// so a peer cannot make us allocate what it merely claims to send.
const eagerPayloadLimit = 1 << 20

// Reader reads frames from a connection. It is not safe for concurrent use.
type Reader struct {
	br       *bufio.Reader
	frameMax uint32 // whole frame, header and frame-end included; 0 means no limit
	header   [frameHeaderSize]byte
}

// NewReader returns a Reader that buffers r and accepts frames up to DefaultFrameMax.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, readBufferSize), frameMax: DefaultFrameMax}
}

// ReadProtocolHeader reads the 8 octets a client opens the connection with.
func (r *Reader) ReadProtocolHeader() ([8]byte, error) {
	var h [8]byte
	_, err := io.ReadFull(r.br, h[:])
	return h, err
}

// SetFrameMax sets the largest frame to accept, counting the 8 octets of header and frame-end,
// as connection.tune negotiates it. 0 means no limit, as in the spec.
func (r *Reader) SetFrameMax(n uint32) { r.frameMax = n }

// Buffered returns how many bytes have been read from the connection but not yet returned as
// frames, so a caller can handle the frames already here before flushing its replies.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// ReadFrame reads the next frame. A frame larger than the frame max, of an unknown type, or
// without the frame-end octet is an *Error with code FrameError (RabbitMQ's rabbit_reader
// answers all three with frame_error), and the connection cannot be read further. I/O errors
// come back as they are: io.EOF between frames, io.ErrUnexpectedEOF inside one.
func (r *Reader) ReadFrame() (Frame, error) {
	if _, err := io.ReadFull(r.br, r.header[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Type: r.header[0], Channel: binary.BigEndian.Uint16(r.header[1:])}
	size := binary.BigEndian.Uint32(r.header[3:])

	// Refuse before allocating anything for the payload.
	if r.frameMax != 0 && uint64(size)+frameOverhead > uint64(r.frameMax) {
		return Frame{}, Errorf(FrameError, "frame of %d bytes exceeds frame max %d", uint64(size)+frameOverhead, r.frameMax)
	}
	switch f.Type {
	case FrameMethod, FrameHeader, FrameBody:
	case FrameHeartbeat:
		if size != 0 {
			return Frame{}, Errorf(FrameError, "heartbeat frame with a %d-byte payload", size)
		}
	default:
		return Frame{}, Errorf(FrameError, "unknown frame type %d", f.Type)
	}

	payload, err := r.readPayload(size)
	if err != nil {
		return Frame{}, err
	}
	end, err := r.br.ReadByte()
	if err != nil {
		return Frame{}, midFrame(err)
	}
	if end != FrameEnd {
		return Frame{}, Errorf(FrameError, "frame-end octet is 0x%02X, not 0xCE", end)
	}
	f.Payload = payload
	return f, nil
}

func (r *Reader) readPayload(size uint32) ([]byte, error) {
	if size <= eagerPayloadLimit {
		payload := make([]byte, size)
		if _, err := io.ReadFull(r.br, payload); err != nil {
			return nil, midFrame(err)
		}
		return payload, nil
	}
	var payload []byte
	for remaining := size; remaining > 0; {
		chunk := int(min(remaining, eagerPayloadLimit))
		n := len(payload)
		payload = slices.Grow(payload, chunk)[:n+chunk]
		if _, err := io.ReadFull(r.br, payload[n:]); err != nil {
			return nil, midFrame(err)
		}
		remaining -= uint32(chunk)
	}
	return payload, nil
}

// midFrame reports running out of bytes inside a frame as io.ErrUnexpectedEOF: only between
// frames is the end of the stream an orderly io.EOF.
func midFrame(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
