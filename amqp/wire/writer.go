package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// writeBufferSize is the Writer's buffer: many small frames go out in one system call when the
// caller flushes only once it has nothing more to send.
const writeBufferSize = 64 << 10

// Writer writes frames to a connection. Nothing reaches the connection until the buffer fills
// or Flush is called. It is not safe for concurrent use.
type Writer struct {
	bw *bufio.Writer
	// scratch holds method and content header frames while they are encoded; it is reused so
	// that steady-state writing does not allocate.
	scratch []byte
	header  [frameHeaderSize]byte
}

// NewWriter returns a buffered Writer on w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, writeBufferSize)}
}

// WriteProtocolHeader writes the AMQP 0-9-1 protocol header, which a server sends back when it
// refuses the version a client asked for.
func (w *Writer) WriteProtocolHeader() error {
	_, err := w.bw.WriteString(ProtocolHeader)
	return err
}

// WriteFrame writes one frame with the given payload.
func (w *Writer) WriteFrame(typ uint8, channel uint16, payload []byte) error {
	if uint64(len(payload)) > math.MaxUint32 {
		return fmt.Errorf("amqp: frame payload of %d bytes does not fit a frame", len(payload))
	}
	w.header[0] = typ
	binary.BigEndian.PutUint16(w.header[1:], channel)
	binary.BigEndian.PutUint32(w.header[3:], uint32(len(payload)))
	w.bw.Write(w.header[:])
	w.bw.Write(payload)
	// bufio.Writer remembers the first write error and returns it from every later call.
	return w.bw.WriteByte(FrameEnd)
}

// WriteHeartbeat writes a heartbeat frame.
func (w *Writer) WriteHeartbeat() error {
	return w.WriteFrame(FrameHeartbeat, 0, nil)
}

// WriteMethod writes a method frame.
func (w *Writer) WriteMethod(channel uint16, m Method) error {
	frame, err := appendMethodFrame(w.scratch[:0], channel, m)
	if err != nil {
		return err
	}
	w.scratch = frame
	_, err = w.bw.Write(frame)
	return err
}

// WriteContent writes a method that carries content, its content header, and the body split
// into body frames so that no frame exceeds frameMax (0 means no limit). An empty body has no
// body frame. props may be nil for a message without properties.
//
// Nothing is written if the method or header does not encode or does not fit in frameMax.
func (w *Writer) WriteContent(channel uint16, m Method, props *Properties, body []byte, frameMax uint32) error {
	if !m.HasContent() {
		return fmt.Errorf("amqp: %s carries no content", m.Name())
	}
	if frameMax != 0 && frameMax <= frameOverhead {
		return fmt.Errorf("amqp: frame max %d leaves no room for a payload", frameMax)
	}
	frames, err := appendMethodFrame(w.scratch[:0], channel, m)
	if err != nil {
		return err
	}
	methodFrameSize := len(frames)
	frames, err = appendHeaderFrame(frames, channel, m.ClassID(), props, uint64(len(body)))
	if err != nil {
		return err
	}
	w.scratch = frames
	if frameMax != 0 {
		if uint64(methodFrameSize) > uint64(frameMax) {
			return fmt.Errorf("amqp: %s frame of %d bytes exceeds frame max %d", m.Name(), methodFrameSize, frameMax)
		}
		if headerFrameSize := len(frames) - methodFrameSize; uint64(headerFrameSize) > uint64(frameMax) {
			return fmt.Errorf("amqp: content header frame of %d bytes exceeds frame max %d", headerFrameSize, frameMax)
		}
	}
	if _, err := w.bw.Write(frames); err != nil {
		return err
	}

	maxChunk := uint64(len(body))
	if frameMax != 0 {
		maxChunk = uint64(frameMax - frameOverhead)
	}
	for len(body) > 0 {
		chunk := body[:min(uint64(len(body)), maxChunk)]
		if err := w.WriteFrame(FrameBody, channel, chunk); err != nil {
			return err
		}
		body = body[len(chunk):]
	}
	return nil
}

// Flush writes whatever is buffered to the connection.
func (w *Writer) Flush() error { return w.bw.Flush() }

// Buffered returns how many bytes wait for Flush.
func (w *Writer) Buffered() int { return w.bw.Buffered() }

func appendMethodFrame(buf []byte, channel uint16, m Method) ([]byte, error) {
	start := len(buf)
	buf = appendFrameHeader(buf, FrameMethod, channel)
	buf, err := AppendMethod(buf, m)
	if err != nil {
		return buf[:start], err
	}
	return endFrame(buf, start), nil
}

func appendHeaderFrame(buf []byte, channel, classID uint16, props *Properties, bodySize uint64) ([]byte, error) {
	start := len(buf)
	buf = appendFrameHeader(buf, FrameHeader, channel)
	h := ContentHeader{ClassID: classID, BodySize: bodySize}
	if props != nil {
		h.Properties = *props
	}
	buf, err := AppendContentHeader(buf, &h)
	if err != nil {
		return buf[:start], err
	}
	return endFrame(buf, start), nil
}

// appendFrameHeader appends a frame header whose size endFrame fills in.
func appendFrameHeader(buf []byte, typ uint8, channel uint16) []byte {
	buf = append(buf, typ)
	buf = binary.BigEndian.AppendUint16(buf, channel)
	return append(buf, 0, 0, 0, 0)
}

// endFrame patches the size of the frame that starts at buf[start:] and appends frame-end.
func endFrame(buf []byte, start int) []byte {
	binary.BigEndian.PutUint32(buf[start+3:], uint32(len(buf)-start-frameHeaderSize))
	return append(buf, FrameEnd)
}
