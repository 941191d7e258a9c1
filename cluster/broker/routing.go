package broker

import (
	"errors"
	"slices"

	"github.com/warrenmq/warren/amqp/wire"
)

// Route appends to out the queues a message published to exchangeName
// reaches. keys are its routing keys: the routing key, then those of its
// CC and BCC headers (see RoutingKeys); headers are its headers, for
// headers exchanges. The exchange must exist and not be internal.
//
// On a cluster every node routes from its own copy of the metadata. A
// miss (no such exchange, or no queue reached) while that copy may be
// behind (meta.Store.MayBeStale) first catches up with the metadata
// leader and routes again: a client that declared and bound through
// another node a moment ago must not have its confirmed publishes dropped
// as unroutable. It happened when the metadata leader stopped right after
// a declaration: the other nodes learnt of it seconds later, from the
// next leader (found by jepsen/).
//
// If that catch-up fails (no metadata leader within reach: a partition),
// a message that reached no queue through an existing exchange gets
// ErrRouteUncertain rather than being taken as unroutable: confirming it
// would drop a message whose queue may well exist.
func (g *exchangeGraph) Route(exchangeName string, keys []string, headers wire.Table, out []*Queue) ([]*Queue, error) {
	n := len(out)
	out, found, err := g.route(exchangeName, keys, headers, out)
	if found && (err != nil || len(out) > n) {
		return out, err
	}
	// Routed again after a catch-up, or at once when nothing may be
	// behind: the change missed may have reached the model since the
	// first attempt (lookAgainAfterMiss).
	if g.v.b.fresh.mayBeStale() && !g.v.b.fresh.catchUp() {
		if found {
			err = ErrRouteUncertain
		}
		return out, err
	}
	out, _, err = g.route(exchangeName, keys, headers, out[:n])
	return out, err
}

// ErrRouteUncertain: a message reached no queue on a node whose metadata
// may be behind and that could not catch up. The publisher gets
// basic.nack: it may have been routable.
var ErrRouteUncertain = errors.New("broker: no queue reached, and this node's metadata may be behind (the metadata leader is out of reach)")

// route is one routing attempt; found says the exchange exists.
func (g *exchangeGraph) route(exchangeName string, keys []string, headers wire.Table, out []*Queue) ([]*Queue, bool, error) {
	g.v.mu.RLock()
	defer g.v.mu.RUnlock()
	x, ok := g.exchanges[exchangeName]
	if !ok {
		return out, false, g.v.notFound("exchange", exchangeName)
	}
	if x.rec.Internal {
		return out, true, wire.Errorf(wire.AccessRefused, "cannot publish to internal %s", describeExchange(exchangeName, g.v.name))
	}
	return g.routeLocked(x, keys, headers, out), true, nil
}

// routeLocked routes through x, on through exchange-to-exchange bindings
// and alternate exchanges. Without either, nothing is allocated beyond
// out's growth. v.mu is held (read).
func (g *exchangeGraph) routeLocked(x *exchange, keys []string, headers wire.Table, out []*Queue) []*Queue {
	if x.isDefault() {
		return g.routeDefaultLocked(keys, out)
	}
	out, xs, matched := x.route(keys, headers, out, nil)
	if len(xs) == 0 && (matched || x.alternate == "") {
		return out
	}
	return g.routeOnLocked(x, matched, xs, keys, headers, out)
}

// routeDefaultLocked routes through the default exchange: to the queue
// named by each key.
func (g *exchangeGraph) routeDefaultLocked(keys []string, out []*Queue) []*Queue {
	for _, k := range keys {
		if q, ok := g.v.queues[k]; ok {
			out = appendUnique(out, q)
		}
	}
	return out
}

// routeOnLocked carries on from exchange x, which routed to the exchanges
// in work (matched: x had a matching binding at all), as RabbitMQ's
// rabbit_exchange:route/3 does: every exchange reached routes the message
// in turn, each at most once (so cycles end), and an exchange that
// matches no binding hands the message to its alternate exchange, if
// that exists. Queues are collected once each.
func (g *exchangeGraph) routeOnLocked(x *exchange, matched bool, work []*exchange, keys []string, headers wire.Table, out []*Queue) []*Queue {
	seen := []*exchange{x}
	if !matched && x.alternate != "" {
		if ae, ok := g.exchanges[x.alternate]; ok {
			work = append(work, ae)
		}
	}
	var next []*exchange
	for len(work) > 0 {
		y := work[len(work)-1]
		work = work[:len(work)-1]
		if slices.Contains(seen, y) {
			continue
		}
		seen = append(seen, y)
		if y.isDefault() {
			out = g.routeDefaultLocked(keys, out)
			continue
		}
		var m bool
		out, next, m = y.route(keys, headers, out, next[:0])
		work = append(work, next...)
		if !m && y.alternate != "" {
			if ae, ok := g.exchanges[y.alternate]; ok {
				work = append(work, ae)
			}
		}
	}
	return out
}

// CheckPublish checks that u may publish to exchangeName (write access).
// The channel caches the answer per exchange.
func (g *exchangeGraph) CheckPublish(u *User, exchangeName string) error {
	return g.v.check(u, Write, "exchange", exchangeName)
}
