package server

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
)

// mechanisms offered in connection.start, most preferred first.
const mechanisms = "PLAIN AMQPLAIN"

func (c *conn) serverProperties() wire.Table {
	return wire.Table{
		"product":      c.s.cfg.Product,
		"version":      c.s.cfg.Version,
		"platform":     "Go " + runtime.Version(),
		"cluster_name": c.s.cfg.ClusterName,
		"copyright":    "Copyright (c) the Warren authors",
		"information":  "Warren: RabbitMQ-compatible quorum queues. Licensed under the Apache License 2.0.",
		"capabilities": wire.Table{
			"publisher_confirms":           true,
			"exchange_exchange_bindings":   true,
			"basic.nack":                   true,
			"consumer_cancel_notify":       true,
			"connection.blocked":           true,
			"consumer_priorities":          true,
			"authentication_failure_close": true,
			"per_consumer_qos":             true,
			"direct_reply_to":              true,
		},
	}
}

// handshake runs the protocol header check, start, tune and open, within
// the handshake timeout. Errors here mostly end in a closed socket without
// a close frame, as in RabbitMQ; a refused login or vhost gets a
// connection.close where the spec or the client's capabilities allow it.
func (c *conn) handshake() error {
	c.nc.SetDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	defer c.nc.SetDeadline(time.Time{})
	if err := c.startTLS(); err != nil {
		return err
	}

	header, err := c.r.ReadProtocolHeader()
	if err != nil {
		return fmt.Errorf("read protocol header: %w", err)
	}
	if string(header[:]) != wire.ProtocolHeader {
		// Tell the client which protocol we speak, then hang up.
		c.w.WriteProtocolHeader()
		c.w.Flush()
		return fmt.Errorf("unsupported protocol header %q", header[:])
	}

	err = c.sendDirect(0, &wire.ConnectionStart{
		VersionMajor:     0,
		VersionMinor:     9,
		ServerProperties: c.serverProperties(),
		Mechanisms:       c.offeredMechanisms(),
		Locales:          "en_US",
	})
	if err != nil {
		return fmt.Errorf("send connection.start: %w", err)
	}

	startOk, err := readHandshakeMethod[*wire.ConnectionStartOk](c)
	if err != nil {
		return err
	}
	c.readCapabilities(startOk.ClientProperties)
	if err := c.authenticate(startOk); err != nil {
		return err
	}

	err = c.sendDirect(0, &wire.ConnectionTune{
		ChannelMax: c.s.cfg.ChannelMax,
		FrameMax:   c.s.cfg.FrameMax,
		Heartbeat:  uint16(c.s.cfg.Heartbeat / time.Second),
	})
	if err != nil {
		return fmt.Errorf("send connection.tune: %w", err)
	}
	tuneOk, err := readHandshakeMethod[*wire.ConnectionTuneOk](c)
	if err != nil {
		return err
	}
	if err := c.negotiate(tuneOk); err != nil {
		var ae *wire.Error
		if errors.As(err, &ae) {
			c.sendDirect(0, ae.ConnectionClose())
		}
		return err
	}

	open, err := readHandshakeMethod[*wire.ConnectionOpen](c)
	if err != nil {
		return err
	}
	v, err := c.s.broker.OpenVhost(c.user, open.VirtualHost)
	if err != nil {
		var ae *wire.Error
		if errors.As(err, &ae) {
			c.sendDirect(0, withMethod(ae, open).ConnectionClose())
		}
		return err
	}
	if err := c.checkConnectionLimits(v); err != nil {
		c.sendDirect(0, withMethod(err, open).ConnectionClose())
		return err
	}
	c.vhost = v
	c.ident.Store(newConnIdent(c, startOk.ClientProperties))
	return c.sendDirect(0, &wire.ConnectionOpenOk{})
}

// readHandshakeMethod reads the next frame and insists that it is the
// method the handshake expects next.
func readHandshakeMethod[M wire.Method](c *conn) (M, error) {
	var zero M
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			return zero, fmt.Errorf("read handshake frame: %w", err)
		}
		if f.Type == wire.FrameHeartbeat {
			continue
		}
		if f.Type != wire.FrameMethod || f.Channel != 0 {
			return zero, fmt.Errorf("unexpected frame type %d on channel %d during handshake", f.Type, f.Channel)
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return zero, fmt.Errorf("decode handshake method: %w", err)
		}
		if close, ok := m.(*wire.ConnectionClose); ok {
			c.sendDirect(0, &wire.ConnectionCloseOk{})
			return zero, fmt.Errorf("client closed during handshake: %d %s", close.ReplyCode, close.ReplyText)
		}
		want, ok := m.(M)
		if !ok {
			return zero, fmt.Errorf("expected %s during handshake, got %s", zero.Name(), m.Name())
		}
		return want, nil
	}
}

func (c *conn) readCapabilities(props wire.Table) {
	caps, _ := props["capabilities"].(wire.Table)
	flag := func(k string) bool { b, _ := caps[k].(bool); return b }
	c.caps = capabilities{
		consumerCancelNotify:       flag("consumer_cancel_notify"),
		authenticationFailureClose: flag("authentication_failure_close"),
		connectionBlocked:          flag("connection.blocked"),
	}
	if name, ok := props["connection_name"].(string); ok {
		c.log = c.log.With("connection_name", name)
	}
}

// authenticate checks the start-ok credentials. A refused login is told
// to the client only if it announced authentication_failure_close. A
// source address whose logins failed waits first (guard.go).
func (c *conn) authenticate(m *wire.ConnectionStartOk) error {
	remote := c.nc.RemoteAddr()
	if d := c.s.logins.delay(remote, time.Now()); d > 0 {
		time.Sleep(d) // within the handshake timeout; the handshake cap bounds how many wait
	}
	u, err := c.login(m)
	if err != nil {
		c.s.logins.failed(remote, time.Now())
	} else {
		c.s.logins.succeeded(remote)
	}
	if err != nil {
		var ae *wire.Error
		if errors.As(err, &ae) && c.caps.authenticationFailureClose {
			c.sendDirect(0, ae.ConnectionClose())
		}
		return err
	}
	c.user = u
	return nil
}

// login checks the mechanism's credentials: a password for PLAIN and
// AMQPLAIN, the verified client certificate for EXTERNAL.
func (c *conn) login(m *wire.ConnectionStartOk) (*broker.User, error) {
	if m.Mechanism == "EXTERNAL" {
		if c.peerCert == nil {
			// Not offered on this connection.
			return nil, fmt.Errorf("EXTERNAL login without a verified client certificate")
		}
		return c.s.broker.AuthenticateExternal(certUser(c.peerCert, c.s.cfg.CertLoginFrom), c.nc.RemoteAddr())
	}
	username, password, err := parseCredentials(m.Mechanism, m.Response)
	if err != nil {
		return nil, err
	}
	return c.s.broker.Authenticate(m.Mechanism, username, password, c.nc.RemoteAddr())
}

// parseCredentials decodes a PLAIN or AMQPLAIN response.
func parseCredentials(mechanism, response string) (user, pass string, err error) {
	switch mechanism {
	case "PLAIN":
		// [authzid] NUL authcid NUL passwd (RFC 4616).
		parts := bytes.SplitN([]byte(response), []byte{0}, 3)
		if len(parts) != 3 {
			return "", "", fmt.Errorf("PLAIN response malformed")
		}
		return string(parts[1]), string(parts[2]), nil
	case "AMQPLAIN":
		// A field table without its length prefix.
		raw := make([]byte, 4+len(response))
		raw[0], raw[1], raw[2], raw[3] = byte(len(response)>>24), byte(len(response)>>16), byte(len(response)>>8), byte(len(response))
		copy(raw[4:], response)
		t, _, err := wire.DecodeTable(raw)
		if err != nil {
			return "", "", fmt.Errorf("AMQPLAIN response malformed: %w", err)
		}
		user, _ = t["LOGIN"].(string)
		pass, _ = t["PASSWORD"].(string)
		return user, pass, nil
	}
	return "", "", fmt.Errorf("unknown authentication mechanism '%s'", mechanism)
}

// negotiate applies the client's tune-ok within the limits we offered.
func (c *conn) negotiate(m *wire.ConnectionTuneOk) error {
	fail := func(format string, args ...any) error {
		return withMethod(wire.Errorf(wire.NotAllowed, format, args...), &wire.ConnectionTune{})
	}
	switch {
	case m.FrameMax == 0:
		c.frameMax = c.s.cfg.FrameMax
	case m.FrameMax < wire.FrameMinSize:
		return fail("negotiated frame_max = %d is lower than the minimum allowed value (%d)", m.FrameMax, wire.FrameMinSize)
	case m.FrameMax > c.s.cfg.FrameMax:
		return fail("negotiated frame_max = %d is higher than the maximum allowed value (%d)", m.FrameMax, c.s.cfg.FrameMax)
	default:
		c.frameMax = m.FrameMax
	}
	switch {
	case m.ChannelMax == 0:
		c.channelMax = c.s.cfg.ChannelMax
	case m.ChannelMax > c.s.cfg.ChannelMax:
		return fail("negotiated channel_max = %d is higher than the maximum allowed value (%d)", m.ChannelMax, c.s.cfg.ChannelMax)
	default:
		c.channelMax = m.ChannelMax
	}
	c.heartbeat = time.Duration(m.Heartbeat) * time.Second
	c.live.timeout = 2 * c.heartbeat
	c.r.SetFrameMax(c.frameMax)
	return nil
}
