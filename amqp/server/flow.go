package server

import (
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq/queue"
)

// channelFlow carries out channel.flow from the client. active=false holds
// back deliveries to the channel's consumers: a delivery a queue makes
// meanwhile is kept in its consumer's held list, and the consumer is
// paused, so that queues deliver nothing more to it; active=true sends
// what was held and resumes them. Deliveries already queued for the socket
// before flow-ok still arrive.
//
// RabbitMQ 4.3 refuses active=false with 540 NOT_IMPLEMENTED
// "active=false"; Warren implements the 0-9-1 semantics instead.
func (ch *channel) channelFlow(m *wire.ChannelFlow) error {
	ch.mu.Lock()
	ch.flowOff = !m.Active
	ch.mu.Unlock()
	ch.reply(&wire.ChannelFlowOk{Active: m.Active})
	if m.Active {
		ch.unblock()
	}
	return nil
}

// unblock sends deliveries held back by channel.flow or the global
// prefetch while the channel no longer blocks them, and resumes the
// consumers that have nothing held any more. Called whenever a block may
// have lifted (flow on, acks, qos changed).
func (ch *channel) unblock() {
	var resume, viaWriter []*consumer
	ch.mu.Lock()
	for _, k := range ch.consumers {
		if len(k.held) == 0 {
			continue
		}
		full := false
		n := 0
		for n < len(k.held) && !ch.blockedLocked(k) {
			if !ch.deliverLocked(k, k.held[n]) {
				full = true
			}
			k.held[n] = queue.Delivery{}
			n++
		}
		k.held = k.held[n:]
		if len(k.held) == 0 {
			k.held = nil
		}
		if n == 0 || len(k.held) > 0 || k.q == nil {
			continue
		}
		if full {
			viaWriter = append(viaWriter, k)
		} else {
			resume = append(resume, k)
		}
	}
	ch.mu.Unlock()
	// Resumed outside ch.mu: a queue may deliver from within Resume.
	for _, k := range viaWriter {
		ch.c.out.pause(k)
	}
	for _, k := range resume {
		k.resume()
	}
}
