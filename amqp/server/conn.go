package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
)

// conn is one client connection. Its reader goroutine (serve) owns the
// channel table and runs every method; the writer goroutine (writeLoop)
// owns the socket's write side.
type conn struct {
	s   *Server
	nc  net.Conn
	log *slog.Logger
	r   *wire.Reader
	w   *wire.Writer
	out *outbox

	owner broker.OwnerID
	// tls is the TLS state of a connection to an AMQPS listener (nil on
	// plain AMQP); peerCert the client's certificate, when it presented
	// one the listener verified (tls.go).
	tls      *tls.ConnectionState
	peerCert *x509.Certificate
	user     *broker.User
	vhost    *broker.Vhost
	caps     capabilities

	frameMax   uint32
	channelMax uint16
	heartbeat  time.Duration

	// channels is written by the reader only, under chMu, so that the
	// reader reads it without the lock and listings (Connections) under it.
	channels   map[uint16]*channel
	chMu       sync.Mutex
	writerDone chan struct{}

	closeOnce sync.Once
	// forced carries a server-initiated close (shutdown) to the reader.
	forced chan *wire.Error
	// closing is set by the first forceClose, so a second close request
	// (another operator, a retried command) finds the connection gone
	// rather than closing it twice.
	closing atomic.Bool
	live    *liveReader

	// For listings (listing.go): who the connection is, once the
	// handshake is done; whether a resource alarm holds it; bytes each way.
	accepted  time.Time
	stats     counters // counters.go
	ident     atomic.Pointer[connIdent]
	blocked   atomic.Bool
	sentBytes atomic.Uint64
}

// capabilities the client announced in connection.start-ok. RabbitMQ
// sends some things only to clients that asked for them.
type capabilities struct {
	consumerCancelNotify       bool
	authenticationFailureClose bool
	connectionBlocked          bool
}

func newConn(s *Server, nc net.Conn) *conn {
	forced := make(chan *wire.Error, 1)
	live := &liveReader{nc: nc, forced: forced}
	c := &conn{
		live:       live,
		s:          s,
		nc:         nc,
		log:        s.log.With("remote", nc.RemoteAddr().String()),
		r:          wire.NewReader(live),
		out:        newOutbox(),
		owner:      broker.NewOwnerID(),
		frameMax:   s.cfg.FrameMax,
		channelMax: s.cfg.ChannelMax,
		channels:   make(map[uint16]*channel),
		writerDone: make(chan struct{}),
		forced:     forced,
		accepted:   time.Now(),
	}
	c.w = wire.NewWriter(countingWriter{nc, &c.sentBytes})
	// Until tune-ok, frames are held to the protocol's minimum, as
	// RabbitMQ does: a client not yet logged in gets no more than that.
	c.r.SetFrameMax(wire.FrameMinSize)
	return c
}

// errClientClosed ends the read loop after a client's connection.close.
var errClientClosed = errors.New("connection closed by client")

func (c *conn) serve() {
	defer c.nc.Close()
	err := c.handshake()
	c.s.handshakes.leave()
	if err != nil {
		c.log.Info("handshake failed", "err", err)
		return
	}
	c.log.Info("connection opened", "user", c.user.Name, "vhost", c.vhost.Name())
	go c.writeLoop()
	err = c.readLoop()
	c.cleanup()
	switch {
	case errors.Is(err, errClientClosed):
		c.log.Info("connection closed by client")
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed):
		c.log.Warn("client unexpectedly closed TCP connection")
	default:
		c.log.Warn("connection closed", "err", err)
	}
}

// forceClose closes the connection from outside the reader (shutdown).
func (c *conn) forceClose(e *wire.Error) {
	c.closing.Store(true)
	select {
	case c.forced <- e:
	default:
	}
	// Wake the reader from its blocking read; it sends the close.
	c.nc.SetReadDeadline(time.Now())
}

// readLoop reads and dispatches frames until the connection ends.
func (c *conn) readLoop() error {
	for {
		// forceClose wakes the reader with a past read deadline, which
		// the lines above overwrite if it came while a frame was being
		// handled; and a busy client's next frame would then read fine.
		// So look for it here too (forceClose queues the error before
		// setting the deadline, so one of the two always sees it).
		select {
		case e := <-c.forced:
			return c.closeWith(e)
		default:
		}
		f, err := c.r.ReadFrame()
		if err != nil {
			select {
			case e := <-c.forced:
				return c.closeWith(e)
			default:
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				c.log.Warn("missed heartbeats from client", "timeout", c.heartbeat)
				return errors.New("missed heartbeats")
			}
			var ae *wire.Error
			if errors.As(err, &ae) {
				return c.closeWith(ae)
			}
			return err
		}
		if err := c.dispatch(f); err != nil {
			var ae *wire.Error
			if errors.As(err, &ae) {
				return c.closeWith(ae)
			}
			return err
		}
		c.out.waitBelowHigh()
	}
}

// dispatch routes one frame to the connection or to its channel.
func (c *conn) dispatch(f wire.Frame) error {
	if f.Channel == 0 {
		return c.connectionFrame(f)
	}
	if f.Type == wire.FrameHeartbeat {
		return wire.Errorf(wire.UnexpectedFrame, "heartbeat frame on channel %d", f.Channel)
	}
	ch := c.channels[f.Channel]
	if ch == nil {
		return c.openChannel(f)
	}
	return ch.handleFrame(f)
}

func (c *conn) connectionFrame(f wire.Frame) error {
	switch f.Type {
	case wire.FrameHeartbeat:
		return nil
	case wire.FrameMethod:
	default:
		return wire.Errorf(wire.UnexpectedFrame, "frame of type %d on channel 0", f.Type)
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil {
		return err
	}
	switch m := m.(type) {
	case *wire.ConnectionClose:
		c.log.Debug("client closing connection", "code", m.ReplyCode, "text", m.ReplyText)
		// sendDirect writes the socket itself: the writer goroutine must
		// have flushed what it holds and stopped first, or the two race
		// on the buffered writer (and close-ok could overtake frames).
		c.stopWriter()
		c.sendDirect(0, &wire.ConnectionCloseOk{})
		return errClientClosed
	case *wire.ConnectionCloseOk:
		return errClientClosed
	case *wire.ConnectionBlocked, *wire.ConnectionUnblocked:
		return nil // a client telling us it is blocked changes nothing here
	}
	return withMethod(wire.Errorf(wire.ChannelError, "unexpected method in connection state running"), m)
}

func (c *conn) openChannel(f wire.Frame) error {
	if f.Type != wire.FrameMethod {
		return wire.Errorf(wire.UnexpectedFrame, "expected method frame, got non method frame instead")
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil {
		return err
	}
	if _, ok := m.(*wire.ChannelOpen); !ok {
		return withMethod(wire.Errorf(wire.ChannelError, "expected 'channel.open'"), m)
	}
	if f.Channel > c.channelMax || len(c.channels) >= int(c.channelMax) {
		return withMethod(wire.Errorf(wire.NotAllowed, "number of channels opened (%d) has reached the negotiated channel_max (%d)", len(c.channels), c.channelMax), m)
	}
	if err := c.checkChannelLimits(); err != nil {
		return withMethod(err, m)
	}
	ch := newChannel(c, f.Channel)
	c.chMu.Lock()
	c.channels[f.Channel] = ch
	c.chMu.Unlock()
	c.stats.add(cChannelsOpened, 1)
	c.out.push(outItem{channel: f.Channel, method: &wire.ChannelOpenOk{}})
	return nil
}

// removeChannel forgets a closed channel.
func (c *conn) removeChannel(id uint16) {
	c.chMu.Lock()
	delete(c.channels, id)
	c.chMu.Unlock()
	c.stats.add(cChannelsClosed, 1)
}

// sendDirect writes a method bypassing the outbox, for the handshake and
// the final close, when the writer goroutine is not running.
func (c *conn) sendDirect(channel uint16, m wire.Method) error {
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := c.w.WriteMethod(channel, m); err != nil {
		return err
	}
	return c.w.Flush()
}

// closeWith sends connection.close for a hard error, waits briefly for
// close-ok, and returns the error that ends the connection.
func (c *conn) closeWith(e *wire.Error) error {
	c.log.Warn("closing connection", "code", e.Code, "text", e.Text, "class", e.ClassID, "method", e.MethodID)
	c.stopWriter()
	c.sendDirect(0, e.ConnectionClose())
	// Wait for close-ok, ignoring anything else, as the spec asks; a
	// client that never answers is cut off after a grace period.
	c.live.timeout = 0
	c.nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			return e
		}
		if f.Channel == 0 && f.Type == wire.FrameMethod {
			if m, err := wire.DecodeMethod(f.Payload); err == nil {
				switch m.(type) {
				case *wire.ConnectionClose:
					c.sendDirect(0, &wire.ConnectionCloseOk{})
					return e
				case *wire.ConnectionCloseOk:
					return e
				}
			}
		}
	}
}

// stopWriter ends the writer goroutine after it has written what it has.
func (c *conn) stopWriter() {
	c.closeOnce.Do(func() {
		c.out.close()
		select {
		case <-c.writerDone:
		case <-time.After(5 * time.Second):
			// The client stopped reading and the writer is stuck in a
			// write: cut the socket to free it.
			c.nc.Close()
			<-c.writerDone
		}
	})
}

// cleanup releases everything the connection held: channels (their
// consumers are cancelled, unacked messages requeued) and exclusive
// queues.
func (c *conn) cleanup() {
	for id, ch := range c.channels {
		ch.op.Lock()
		ch.release()
		ch.op.Unlock()
		c.removeChannel(id)
	}
	c.stopWriter()
	if c.vhost != nil {
		c.vhost.ReleaseOwner(c.owner)
	}
}

// withMethod records which method caused e, for the close frame.
func withMethod(e *wire.Error, m wire.Method) *wire.Error {
	if e.ClassID == 0 && m != nil {
		e.ClassID, e.MethodID = m.ClassID(), m.MethodID()
	}
	return e
}

// liveReader gives every read of the socket a fresh deadline of two heartbeat intervals, so
// that any byte from the client counts as a sign of life.
type liveReader struct {
	nc      net.Conn
	timeout time.Duration    // owned by the reader goroutine
	forced  chan *wire.Error // conn.forced
	read    atomic.Uint64    // bytes read, for listings
}

func (l *liveReader) Read(p []byte) (int, error) {
	if l.timeout > 0 {
		l.nc.SetReadDeadline(time.Now().Add(l.timeout))
	}
	// After the deadline is set: either we see forced, or forceClose's
	// SetReadDeadline(now) comes after ours and wakes the read.
	if len(l.forced) > 0 {
		return 0, os.ErrDeadlineExceeded
	}
	n, err := l.nc.Read(p)
	l.read.Add(uint64(n))
	return n, err
}
