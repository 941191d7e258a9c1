package broker

import (
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
