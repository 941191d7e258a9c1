package broker

import (
	"errors"
	"slices"
	"strings"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// ExchangeDeclare is exchange.declare's arguments.
type ExchangeDeclare struct {
	Name       string
	Type       string
	Passive    bool
	Durable    bool
	AutoDelete bool
	Internal   bool
	Arguments  wire.Table
}

// exchangeGraph is a vhost's exchanges and the bindings between them and
// to its queues, declaring and deleting them, and routing a message
// through them. Its map and the exchanges in it are guarded by the
// vhost's lock (v.mu): routing reads queues as well.
type exchangeGraph struct {
	v         *Vhost
	exchanges map[string]*exchange
}

// predeclared are the exchanges every vhost has, as in RabbitMQ.
var predeclared = []catalog.Exchange{
	{Name: "", Type: ExchangeDirect, Durable: true},
	{Name: "amq.direct", Type: ExchangeDirect, Durable: true},
	{Name: "amq.fanout", Type: ExchangeFanout, Durable: true},
	{Name: "amq.topic", Type: ExchangeTopic, Durable: true},
	{Name: "amq.headers", Type: ExchangeHeaders, Durable: true},
	{Name: "amq.match", Type: ExchangeHeaders, Durable: true},
}

// newExchangeGraph is v's exchanges when it is created: the predeclared
// ones.
func newExchangeGraph(v *Vhost) exchangeGraph {
	g := exchangeGraph{v: v, exchanges: make(map[string]*exchange)}
	for _, x := range predeclared {
		x.Vhost = v.name
		g.exchanges[x.Name] = newExchange(x, nil)
	}
	return g
}

func describeExchange(name, vhost string) string {
	return "exchange '" + name + "' in vhost '" + vhost + "'"
}

// comparedExchangeArgs are compared on redeclaration, as in RabbitMQ.
var comparedExchangeArgs = []string{"alternate-exchange"}

// DeclareExchange declares (or, passively, checks) an exchange.
func (g *exchangeGraph) DeclareExchange(u *User, d ExchangeDeclare) error {
	if d.Name == "" {
		return wire.Errorf(wire.AccessRefused, "operation not permitted on the default exchange")
	}
	if d.Passive {
		// Permission first, as in RabbitMQ.
		if err := g.v.checkAny(u, "exchange", d.Name); err != nil {
			return err
		}
		g.v.mu.RLock()
		_, ok := g.exchanges[d.Name]
		g.v.mu.RUnlock()
		if !ok && g.v.b.fresh.catchUp() {
			g.v.mu.RLock()
			_, ok = g.exchanges[d.Name]
			g.v.mu.RUnlock()
		}
		if !ok {
			return g.v.notFound("exchange", d.Name)
		}
		return nil
	}
	if !knownExchangeType(d.Type) {
		return wire.Errorf(wire.PreconditionFailed, "unknown exchange type '%s'", d.Type)
	}
	if err := g.v.check(u, Configure, "exchange", d.Name); err != nil {
		return err
	}
	if err := g.checkAlternate(u, d); err != nil {
		return err
	}
	g.v.mu.Lock()
	defer g.v.mu.Unlock()
	if x, ok := g.exchanges[d.Name]; ok {
		what := describeExchange(d.Name, g.v.name)
		switch {
		case x.rec.Type != d.Type:
			return inequivalent("type", what, d.Type, x.rec.Type)
		case x.rec.Durable != d.Durable:
			return inequivalent("durable", what, d.Durable, x.rec.Durable)
		case x.rec.AutoDelete != d.AutoDelete:
			return inequivalent("auto_delete", what, d.AutoDelete, x.rec.AutoDelete)
		case x.rec.Internal != d.Internal:
			return inequivalent("internal", what, d.Internal, x.rec.Internal)
		}
		return checkArgsEquivalent(what, comparedExchangeArgs, d.Arguments, x.args)
	}
	if strings.HasPrefix(d.Name, "amq.") {
		return wire.Errorf(wire.AccessRefused, "exchange name '%s' contains reserved prefix 'amq.*'", d.Name)
	}
	argBytes, err := encodeTable(d.Arguments)
	if err != nil {
		return err
	}
	rec := catalog.Exchange{
		Vhost: g.v.name, Name: d.Name, Type: d.Type,
		Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal,
		Arguments: argBytes,
	}
	if g.recordsExchange(rec) {
		if err := g.v.persist(catalog.Put(rec)); err != nil {
			return err
		}
	}
	x := newExchange(rec, d.Arguments)
	g.v.applyExchangePolicyLocked(x)
	g.exchanges[d.Name] = x
	return nil
}

// checkAlternate checks an alternate-exchange argument as RabbitMQ's
// exchange.declare does: it must be a longstr, and declaring needs read
// access to the exchange and write access to the alternate one.
func (g *exchangeGraph) checkAlternate(u *User, d ExchangeDeclare) error {
	arg, ok := d.Arguments["alternate-exchange"]
	if !ok {
		return nil
	}
	ae, ok := arg.(string)
	if !ok {
		return wire.Errorf(wire.PreconditionFailed, "invalid type '%s' for arg '%s' in %s", typeName(arg), "alternate-exchange", describeExchange(d.Name, g.v.name))
	}
	if err := g.v.check(u, Read, "exchange", d.Name); err != nil {
		return err
	}
	if ae == "" {
		ae = "amq.default"
	}
	return g.v.check(u, Write, "exchange", ae)
}

func (g *exchangeGraph) restoreExchange(rec catalog.Exchange) error {
	args, err := decodeTable(rec.Arguments)
	if err != nil {
		return err
	}
	g.v.mu.Lock()
	defer g.v.mu.Unlock()
	x := newExchange(rec, args)
	g.v.applyExchangePolicyLocked(x)
	g.exchanges[rec.Name] = x
	return nil
}

// DeleteExchange deletes an exchange and its bindings. Deleting one that
// does not exist succeeds, as in RabbitMQ.
func (g *exchangeGraph) DeleteExchange(u *User, name string, ifUnused bool) error {
	if name == "" {
		return wire.Errorf(wire.AccessRefused, "operation not permitted on the default exchange")
	}
	if strings.HasPrefix(name, "amq.") {
		return wire.Errorf(wire.AccessRefused, "deletion of system exchange '%s' in vhost '%s' not allowed", name, g.v.name)
	}
	if err := g.v.check(u, Configure, "exchange", name); err != nil {
		return err
	}
	g.v.mu.Lock()
	defer g.v.mu.Unlock()
	x, ok := g.exchanges[name]
	if !ok {
		return nil
	}
	if ifUnused && len(x.bindings) > 0 {
		return wire.Errorf(wire.PreconditionFailed, "%s in use", describeExchange(name, g.v.name))
	}
	return g.v.persist(g.dropExchangeLocked(x)...)
}

// dropExchangeLocked unlinks x, the bindings leaving it and those
// arriving at it, and returns the store changes that go with it. An
// auto-delete source left without bindings goes too, as in RabbitMQ.
// v.mu is held.
func (g *exchangeGraph) dropExchangeLocked(x *exchange) []catalog.Change {
	if g.exchanges[x.rec.Name] != x {
		return nil // already dropped (auto-delete cascade round a cycle)
	}
	delete(g.exchanges, x.rec.Name)
	var changes []catalog.Change
	for _, b := range x.bindings {
		if c, ok := g.unbindLocked(x, b); ok {
			changes = append(changes, c)
		}
	}
	var emptied []*exchange
	for b, src := range x.incoming {
		if c, ok := g.unbindLocked(src, b); ok {
			changes = append(changes, c)
		}
		if src.rec.AutoDelete && len(src.bindings) == 0 {
			emptied = append(emptied, src)
		}
	}
	if g.recordsExchange(x.rec) {
		changes = append(changes, catalog.Del(x.rec))
	}
	for _, src := range emptied {
		changes = append(changes, g.dropExchangeLocked(src)...)
	}
	return changes
}

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
