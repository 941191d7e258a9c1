package server

import "sync/atomic"

// Counters are the server's message and connection totals since it
// started, as RabbitMQ's global counters count them
// (rabbitmq_global_messages_*_total): for rates in Prometheus, they never
// go down when a connection closes.
type Counters struct {
	// Received publishes, and of those the ones in confirm mode.
	Received, ReceivedConfirm uint64
	// Routed to at least one queue; unroutable and dropped, or returned
	// to a mandatory publisher.
	Routed, UnroutableDropped, UnroutableReturned uint64
	// Confirmed: publishes basic.ack confirmed (a multiple ack counts each).
	Confirmed uint64
	// Delivered to consumers with manual and automatic acknowledgement,
	// fetched with basic.get each way, and of all those the redelivered.
	DeliveredManualAck, DeliveredAutoAck, GetManualAck, GetAutoAck uint64
	GetEmpty, Redelivered                                          uint64
	// Acknowledged deliveries (a multiple ack counts each).
	Acknowledged uint64
	// Connections and channels opened and closed.
	ConnectionsOpened, ConnectionsClosed, ChannelsOpened, ChannelsClosed uint64
}

// counter names one of a connection's counts.
type counter int

const (
	cReceived counter = iota
	cReceivedConfirm
	cRouted
	cUnroutableDropped
	cUnroutableReturned
	cConfirmed
	cDeliveredManualAck
	cDeliveredAutoAck
	cGetManualAck
	cGetAutoAck
	cGetEmpty
	cRedelivered
	cAcknowledged
	cChannelsOpened
	cChannelsClosed
	numCounters
)

// counters is one connection's counts (each connection its own, so that
// the hot path's increments never contend), or the sum of the closed ones.
type counters [numCounters]atomic.Uint64

func (c *counters) add(k counter, n uint64) { c[k].Add(n) }

// fold adds a closing connection's counts to the server's.
func (c *counters) fold(from *counters) {
	for k := range from {
		c[k].Add(from[k].Load())
	}
}

// Counters sums the counts of the open connections and of those closed.
func (s *Server) Counters() Counters {
	var sum [numCounters]uint64
	s.mu.Lock()
	// Under s.mu a connection is either open (in s.conns) or folded into
	// s.closed, never both nor neither.
	for c := range s.conns {
		for k := range sum {
			sum[k] += c.stats[k].Load()
		}
	}
	for k := range sum {
		sum[k] += s.closed[k].Load()
	}
	opened, closed := s.opened, s.closedConns
	s.mu.Unlock()
	return Counters{
		Received: sum[cReceived], ReceivedConfirm: sum[cReceivedConfirm],
		Routed: sum[cRouted], UnroutableDropped: sum[cUnroutableDropped], UnroutableReturned: sum[cUnroutableReturned],
		Confirmed:          sum[cConfirmed],
		DeliveredManualAck: sum[cDeliveredManualAck], DeliveredAutoAck: sum[cDeliveredAutoAck],
		GetManualAck: sum[cGetManualAck], GetAutoAck: sum[cGetAutoAck], GetEmpty: sum[cGetEmpty],
		Redelivered: sum[cRedelivered], Acknowledged: sum[cAcknowledged],
		ConnectionsOpened: opened, ConnectionsClosed: closed,
		ChannelsOpened: sum[cChannelsOpened], ChannelsClosed: sum[cChannelsClosed],
	}
}
