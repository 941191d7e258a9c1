package server

import (
	"cmp"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
)

// What operators list of a node's clients: its connections, their
// channels and their consumers, as rabbitmqctl's list_connections,
// list_channels and list_consumers show them. A listing reads what the
// reader goroutine owns only where it is also kept under a lock the
// listing may take (conn.chMu, channel.mu, confirmTracker.mu) or is
// immutable once published (conn.ident, consumer.opts), so a listing never
// waits for a method being handled, nor holds one up for long.

// ConnectionInfo is one client connection.
type ConnectionInfo struct {
	// Name is "client address -> server address", as RabbitMQ names
	// connections.
	Name        string
	User, Vhost string
	// Client is what the client said of itself in connection.start-ok:
	// its connection_name, product, version and platform properties.
	ClientName, ClientProduct, ClientVersion, ClientPlatform string
	ConnectedAt                                              time.Time
	FrameMax                                                 uint32
	ChannelMax                                               uint16
	Heartbeat                                                time.Duration
	// Blocked: a resource alarm holds the connection's publishes (its
	// reader waits), RabbitMQ's state "blocked".
	Blocked bool
	// RecvBytes and SentBytes count the socket's bytes each way.
	RecvBytes, SentBytes uint64
	Channels             []ChannelInfo
}

// ChannelInfo is one open channel of a connection.
type ChannelInfo struct {
	Number                 uint16
	Confirm, Transactional bool
	// Prefetch applies to the channel's next consumers (basic.qos);
	// GlobalPrefetch is shared by its consumers (basic.qos global).
	Prefetch, GlobalPrefetch uint32
	// Unacked are deliveries (and basic.get messages) not yet settled;
	// Unconfirmed are publishes in confirm mode not yet confirmed.
	Unacked, Unconfirmed int
	Consumers            []ConsumerInfo
}

// ConsumerInfo is one consumer of a channel.
type ConsumerInfo struct {
	Queue, Tag  string
	AckRequired bool
	Exclusive   bool
	// Prefetch is the consumer's own limit (the channel's basic.qos when
	// it consumed); 0 is none.
	Prefetch  uint32
	Priority  int32
	Arguments wire.Table
}

// connIdent is what a connection's handshake settled: set once, read by
// listings without locks.
type connIdent struct {
	user, vhost                      string
	name, product, version, platform string
	frameMax                         uint32
	channelMax                       uint16
	heartbeat                        time.Duration
}

func newConnIdent(c *conn, props wire.Table) *connIdent {
	str := func(k string) string { s, _ := props[k].(string); return s }
	return &connIdent{
		user:       c.user.Name,
		vhost:      c.vhost.Name(),
		name:       str("connection_name"),
		product:    str("product"),
		version:    str("version"),
		platform:   str("platform"),
		frameMax:   c.frameMax,
		channelMax: c.channelMax,
		heartbeat:  c.heartbeat,
	}
}

// shownSettings are the reader's channel settings that listings show,
// copied under channel.mu when a method changes them.
type shownSettings struct {
	confirm       bool
	transactional bool
}

// Connections lists the server's open client connections (those past
// their handshake), oldest first, with their channels by number and their
// consumers by tag.
func (s *Server) Connections() []ConnectionInfo {
	conns := s.connSet() // sorted below, by what the listing shows
	out := make([]ConnectionInfo, 0, len(conns))
	for _, c := range conns {
		if info, ok := c.info(); ok {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b ConnectionInfo) int {
		return cmp.Or(a.ConnectedAt.Compare(b.ConnectedAt), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// openConns is a copy of the server's connections, oldest first.
func (s *Server) openConns() []*conn {
	conns := s.connSet()
	slices.SortFunc(conns, func(a, b *conn) int { return a.accepted.Compare(b.accepted) })
	return conns
}

// connSet is a copy of the server's connections, in no order.
func (s *Server) connSet() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// name is the connection's name, as RabbitMQ names connections.
func (c *conn) name() string { return c.nc.RemoteAddr().String() + " -> " + c.nc.LocalAddr().String() }

// info describes c; false until its handshake is done.
func (c *conn) info() (ConnectionInfo, bool) {
	id := c.ident.Load()
	if id == nil {
		return ConnectionInfo{}, false
	}
	info := ConnectionInfo{
		Name:           c.name(),
		User:           id.user,
		Vhost:          id.vhost,
		ClientName:     id.name,
		ClientProduct:  id.product,
		ClientVersion:  id.version,
		ClientPlatform: id.platform,
		ConnectedAt:    c.accepted,
		FrameMax:       id.frameMax,
		ChannelMax:     id.channelMax,
		Heartbeat:      id.heartbeat,
		Blocked:        c.blocked.Load(),
		RecvBytes:      c.live.read.Load(),
		SentBytes:      c.sentBytes.Load(),
	}
	c.chMu.Lock()
	chs := make([]*channel, 0, len(c.channels))
	for _, ch := range c.channels {
		chs = append(chs, ch)
	}
	c.chMu.Unlock()
	for _, ch := range chs {
		info.Channels = append(info.Channels, ch.info())
	}
	slices.SortFunc(info.Channels, func(a, b ChannelInfo) int { return cmp.Compare(a.Number, b.Number) })
	return info, true
}

func (ch *channel) info() ChannelInfo {
	ch.mu.Lock()
	info := ChannelInfo{
		Number:         ch.id,
		Confirm:        ch.shown.confirm,
		Transactional:  ch.shown.transactional,
		Prefetch:       ch.prefetch,
		GlobalPrefetch: ch.globalPrefetch,
		Unacked:        ch.unacked.len(),
	}
	for _, k := range ch.consumers {
		if k.q == nil {
			continue // direct reply-to: no queue, and RabbitMQ lists none
		}
		info.Consumers = append(info.Consumers, ConsumerInfo{
			Queue:       k.q.Name(),
			Tag:         k.tag,
			AckRequired: !k.noAck,
			Exclusive:   k.opts.Exclusive,
			Prefetch:    k.opts.Prefetch,
			Priority:    k.opts.Priority,
			Arguments:   k.opts.Arguments,
		})
	}
	ch.mu.Unlock()
	info.Unconfirmed = ch.pub.confirms.unconfirmed()
	slices.SortFunc(info.Consumers, func(a, b ConsumerInfo) int { return cmp.Compare(a.Tag, b.Tag) })
	return info
}

// countingWriter counts what is written through it (the socket's sent
// bytes: one atomic add per write call, not per frame).
type countingWriter struct {
	w io.Writer
	n *atomic.Uint64
}

func (cw countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n.Add(uint64(n))
	return n, err
}
