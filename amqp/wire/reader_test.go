package wire

import (
	"bytes"
	"errors"
	"io"
	"math"
	"runtime"
	"testing"
)

func TestReadFrameReadsEachType(t *testing.T) {
	var wire []byte
	wire = append(wire, frameBytes(FrameMethod, 1, []byte{0, 20, 0, 10, 0})...)
	wire = append(wire, frameBytes(FrameHeader, 1, []byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0})...)
	wire = append(wire, frameBytes(FrameBody, 1, []byte("x"))...)
	wire = append(wire, frameBytes(FrameHeartbeat, 0, nil)...)
	r := NewReader(bytes.NewReader(wire))
	for _, want := range []Frame{
		{FrameMethod, 1, []byte{0, 20, 0, 10, 0}},
		{FrameHeader, 1, []byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}},
		{FrameBody, 1, []byte("x")},
		{FrameHeartbeat, 0, []byte{}},
	} {
		got, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != want.Type || got.Channel != want.Channel || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestReadProtocolHeader(t *testing.T) {
	r := NewReader(bytes.NewReader([]byte(ProtocolHeader + "rest")))
	h, err := r.ReadProtocolHeader()
	if err != nil || string(h[:]) != ProtocolHeader {
		t.Fatalf("got %q, %v", h, err)
	}
	if r.Buffered() != 4 {
		t.Fatalf("Buffered() = %d", r.Buffered())
	}
	if _, err := NewReader(bytes.NewReader([]byte("AMQP"))).ReadProtocolHeader(); err != io.ErrUnexpectedEOF {
		t.Fatalf("short header: %v", err)
	}
}

// headerOnly serves one frame header and fails the test if anything reads past it.
type headerOnly struct {
	t      *testing.T
	header []byte
}

func (h *headerOnly) Read(p []byte) (int, error) {
	if len(h.header) == 0 {
		h.t.Error("read past the frame header")
		return 0, errors.New("read past the frame header")
	}
	n := copy(p, h.header)
	h.header = h.header[n:]
	return n, nil
}

// leastAllocated runs f a few times and returns the fewest bytes the
// process allocated during one run. TotalAlloc counts every goroutine's
// allocations, so parallel tests add noise, but only ever upwards.
func leastAllocated(f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

func TestReadFrameRefusesOversizeBeforeAllocating(t *testing.T) {
	grew := leastAllocated(func() {
		// A method frame claiming 2^31 bytes of payload.
		r := NewReader(&headerOnly{t: t, header: []byte{FrameMethod, 0, 1, 0x80, 0, 0, 0}})
		_, err := r.ReadFrame()
		wantCode(t, err, FrameError)
	})
	if grew > 64<<10+readBufferSize {
		t.Fatalf("allocated %d bytes refusing the frame", grew)
	}
}

func TestReadFrameHonoursFrameMax(t *testing.T) {
	const frameMax = FrameMinSize
	fits := frameBytes(FrameBody, 1, make([]byte, frameMax-frameOverhead))
	tooBig := frameBytes(FrameBody, 1, make([]byte, frameMax-frameOverhead+1))

	r := NewReader(bytes.NewReader(append(bytes.Clone(fits), tooBig...)))
	r.SetFrameMax(frameMax)
	if _, err := r.ReadFrame(); err != nil {
		t.Fatalf("frame of exactly frame max: %v", err)
	}
	_, err := r.ReadFrame()
	wantCode(t, err, FrameError)

	// The default limit is DefaultFrameMax.
	r = NewReader(bytes.NewReader(frameBytes(FrameBody, 1, make([]byte, DefaultFrameMax-frameOverhead+1))))
	_, err = r.ReadFrame()
	wantCode(t, err, FrameError)
}

func TestReadFrameWithoutLimitReadsLargeFrames(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), (3*eagerPayloadLimit)/16+1)
	r := NewReader(bytes.NewReader(frameBytes(FrameBody, 1, payload)))
	r.SetFrameMax(0)
	f, err := r.ReadFrame()
	if err != nil || !bytes.Equal(f.Payload, payload) {
		t.Fatalf("large frame: %d bytes, %v", len(f.Payload), err)
	}
}

func TestReadFrameWithoutLimitAllocatesOnlyWhatArrives(t *testing.T) {
	// Claims 4 GiB, sends 10 bytes.
	wire := append([]byte{FrameBody, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF}, make([]byte, 10)...)
	grew := leastAllocated(func() {
		r := NewReader(bytes.NewReader(wire))
		r.SetFrameMax(0)
		if _, err := r.ReadFrame(); err != io.ErrUnexpectedEOF {
			t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
		}
	})
	if grew > 4*eagerPayloadLimit+readBufferSize { // far from the 4 GiB claimed
		t.Fatalf("allocated %d bytes for a 10-byte payload", grew)
	}
}

func TestReadFrameErrors(t *testing.T) {
	good := frameBytes(FrameMethod, 1, []byte{0, 20, 0, 10, 0})
	badEnd := bytes.Clone(good)
	badEnd[len(badEnd)-1] = 0
	tests := []struct {
		name string
		wire []byte
		code uint16
		err  error
	}{
		{"bad frame end", badEnd, FrameError, nil},
		{"unknown frame type", frameBytes(4, 1, []byte{1}), FrameError, nil},
		{"heartbeat with payload", frameBytes(FrameHeartbeat, 0, []byte{1}), FrameError, nil},
		{"nothing", nil, 0, io.EOF},
		{"partial header", good[:3], 0, io.ErrUnexpectedEOF},
		{"header only", good[:7], 0, io.ErrUnexpectedEOF},
		{"partial payload", good[:9], 0, io.ErrUnexpectedEOF},
		{"no frame end", good[:len(good)-1], 0, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tt.wire)).ReadFrame()
			if tt.err != nil {
				if err != tt.err {
					t.Fatalf("got %v, want %v", err, tt.err)
				}
				return
			}
			wantCode(t, err, tt.code)
		})
	}
}

func TestReadFramePassesIOErrorsThrough(t *testing.T) {
	boom := errors.New("connection reset")
	_, err := NewReader(io.MultiReader(bytes.NewReader([]byte{1, 0}), &failingReader{boom})).ReadFrame()
	if err != boom {
		t.Fatalf("got %v", err)
	}
}

type failingReader struct{ err error }

func (f *failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestReaderBuffered(t *testing.T) {
	one := frameBytes(FrameHeartbeat, 0, nil)
	r := NewReader(bytes.NewReader(append(bytes.Clone(one), one...)))
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if r.Buffered() != len(one) {
		t.Fatalf("Buffered() = %d, want %d", r.Buffered(), len(one))
	}
}
