package broker

import (
	"context"
	"errors"
	"sync"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// Why a dead letter reached no queue. The queue logs them (at-most-once)
// or tries again later (at-least-once).
var (
	errNoDeadLetterExchange = errors.New("dead-letter exchange does not exist")
	errNoDeadLetterRoute    = errors.New("dead letter routed to no queue")
)

// deadLetterTarget is where a queue's dead letters go: its
// x-dead-letter-exchange and, if given, x-dead-letter-routing-key.
type deadLetterTarget struct {
	exchange      string
	routingKey    string
	hasRoutingKey bool
}

// deadLetter publishes message m, which queue src dead-lettered for reason
// at Unix millisecond at, to the dead-letter exchange, as RabbitMQ 4.3's
// rabbit_dead_letter:publish/5 (at-most-once) and rabbit_fifo_dlx_worker
// (at-least-once) do:
//
//   - the death is recorded in the headers (x-death, x-first-death-*,
//     x-last-death-*; raftq.RecordDeath), with the exchange and routing keys
//     the message had, and its expiration moves into x-death's
//     original-expiration so that it does not expire again;
//   - it is routed through the dead-letter exchange (internal or not) with
//     x-dead-letter-routing-key, or else with its own routing keys (the
//     routing key and the CC header's), and it then carries the exchange's
//     name and the first of those keys;
//   - a target queue that would close a cycle of deaths with no rejection
//     in it is left out (rabbit_dead_letter:detect_cycles/3), so that
//     messages do not expire around a loop for ever.
//
// done is called once: nil when every target queue stored the message,
// else an error (no such exchange, no route, a target refused it).
func (g *exchangeGraph) deadLetter(ctx context.Context, src *Queue, dlx deadLetterTarget, m *queue.Message, reason raftq.Reason, at int64, done func(error)) {
	keys := routingKeys(m)
	p := m.Properties
	p.Headers = raftq.RecordDeath(p.Headers, raftq.Death{
		Queue:         src.rec.Name,
		Reason:        reason,
		Time:          at,
		Exchange:      m.Exchange,
		RoutingKeys:   keys,
		Expiration:    p.Expiration,
		HasExpiration: p.Expiration != "",
	})
	p.Flags |= wire.FlagHeaders
	p.Expiration = ""
	p.Flags &^= wire.FlagExpiration
	if dlx.hasRoutingKey {
		keys = []string{dlx.routingKey}
	}
	out := &queue.Message{Exchange: dlx.exchange, RoutingKey: keys[0], Properties: p, Body: m.Body}

	targets, err := g.routeDeadLetter(dlx.exchange, keys, p.Headers)
	if err != nil {
		done(err)
		return
	}
	if reason != raftq.ReasonRejected {
		deaths, _ := p.Headers["x-death"].([]any)
		kept := targets[:0]
		for _, q := range targets {
			if deathCycle(deaths, q.rec.Name) {
				g.v.b.log.Debug("dead letter dropped: it would cycle back without a rejection", "queue", q.rec.Name, "vhost", g.v.name, "source", src.rec.Name)
				continue
			}
			kept = append(kept, q)
		}
		targets = kept
	}
	if len(targets) == 0 {
		done(errNoDeadLetterRoute)
		return
	}
	all := &confirmAll{remaining: len(targets), done: done}
	for _, q := range targets {
		q.engine.Enqueue(ctx, out, all.one) // errors come through done
	}
}

// routeDeadLetter finds the queues a dead letter reaches through exchange
// name with any of keys, on through exchange-to-exchange bindings and
// alternate exchanges. Unlike a publish, an internal exchange is fine.
func (g *exchangeGraph) routeDeadLetter(name string, keys []string, headers wire.Table) ([]*Queue, error) {
	g.v.mu.RLock()
	defer g.v.mu.RUnlock()
	x, ok := g.exchanges[name]
	if !ok {
		return nil, errNoDeadLetterExchange
	}
	return g.routeLocked(x, keys, headers, nil), nil
}

// routingKeys are the keys a message was published with: its routing key,
// then the CC header's (sender-selected distribution; BCC never stays in
// a stored message).
func routingKeys(m *queue.Message) []string {
	keys := []string{m.RoutingKey}
	return appendHeaderKeys(keys, m.Properties.Headers["CC"])
}

// RoutingKeys appends to keys the routing keys a message published with
// routingKey and headers is routed with: routingKey, then the longstrs in
// its CC and BCC headers (sender-selected distribution, as RabbitMQ's
// mc_amqpl:routing_keys). Values that are not arrays, and array elements
// that are not strings, are ignored.
func RoutingKeys(keys []string, routingKey string, headers wire.Table) []string {
	keys = append(keys, routingKey)
	if headers == nil {
		return keys
	}
	keys = appendHeaderKeys(keys, headers["CC"])
	return appendHeaderKeys(keys, headers["BCC"])
}

func appendHeaderKeys(keys []string, h any) []string {
	list, _ := h.([]any)
	for _, k := range list {
		if s, ok := k.(string); ok {
			keys = append(keys, s)
		}
	}
	return keys
}

// deathCycle says whether dead-lettering a message whose x-death history
// (newest first, the current death included) is deaths into queue target
// closes a cycle with no rejection in it: target is among the queues the
// message died in, and neither that death nor any newer one was a
// rejection (mc:is_death_cycle/2, is_cycle_v2).
func deathCycle(deaths []any, target string) bool {
	for _, d := range deaths {
		var t wire.Table
		switch e := d.(type) {
		case wire.Table:
			t = e
		case map[string]any:
			t = e
		default:
			continue
		}
		if t["reason"] == raftq.ReasonRejected.String() {
			return false
		}
		if t["queue"] == target {
			return true
		}
	}
	return false
}

// confirmAll calls done once every target queue has answered: with the
// first error any of them gave, or nil.
type confirmAll struct {
	mu        sync.Mutex
	remaining int
	err       error
	done      func(error)
}

func (c *confirmAll) one(err error) {
	c.mu.Lock()
	if err != nil && c.err == nil {
		c.err = err
	}
	c.remaining--
	last := c.remaining == 0
	c.mu.Unlock()
	if last {
		c.done(c.err)
	}
}
