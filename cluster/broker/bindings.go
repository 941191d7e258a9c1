package broker

import (
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// QueueBinding is queue.bind's and queue.unbind's arguments.
type QueueBinding struct {
	Queue      string
	Exchange   string
	RoutingKey string
	Arguments  wire.Table
}

// lookupBindEnds finds both ends of a binding and checks access: write on
// the queue, read on the exchange, as RabbitMQ does. v.mu is held.
func (g *exchangeGraph) lookupBindEnds(u *User, owner OwnerID, d QueueBinding) (*exchange, *Queue, error) {
	// RabbitMQ's order (binding_action_with_checks): write on the queue,
	// the default exchange, read on the exchange; only then existence and
	// exclusivity.
	if err := g.v.check(u, Write, "queue", d.Queue); err != nil {
		return nil, nil, err
	}
	if d.Exchange == "" {
		return nil, nil, wire.Errorf(wire.AccessRefused, "operation not permitted on the default exchange")
	}
	if err := g.v.check(u, Read, "exchange", d.Exchange); err != nil {
		return nil, nil, err
	}
	q, ok := g.v.queues[d.Queue]
	if !ok {
		return nil, nil, g.v.notFound("queue", d.Queue)
	}
	x, ok := g.exchanges[d.Exchange]
	if !ok {
		return nil, nil, g.v.notFound("exchange", d.Exchange)
	}
	if err := g.v.accessible(q, owner); err != nil {
		return nil, nil, err
	}
	return x, q, nil
}

// BindQueue binds a queue to an exchange. Binding twice is a no-op.
func (g *exchangeGraph) BindQueue(u *User, owner OwnerID, d QueueBinding) error {
	argBytes, err := encodeTable(d.Arguments)
	if err != nil {
		return err
	}
	g.v.mu.Lock()
	defer g.v.mu.Unlock()
	x, q, err := g.lookupBindEnds(u, owner, d)
	if err != nil {
		return err
	}
	key := bindingKey{destination: d.Queue, routingKey: d.RoutingKey, arguments: string(argBytes)}
	return g.bindLocked(x, &binding{key: key, queue: q}, d.Arguments)
}

// bindLocked validates and adds b, new or not, to x. v.mu is held.
func (g *exchangeGraph) bindLocked(x *exchange, b *binding, args wire.Table) error {
	switch x.rec.Type {
	case ExchangeHeaders:
		if err := validateHeadersBinding(args); err != nil {
			return err
		}
	case ExchangeLocalRandom:
		if err := validateLocalRandomBinding(b); err != nil {
			return err
		}
	}
	if _, ok := x.bindings[b.key]; ok {
		return nil
	}
	if rec, recorded := g.bindingRecord(x, b); recorded {
		if err := g.v.persist(catalog.Put(rec)); err != nil {
			return err
		}
	}
	x.add(b, args)
	return nil
}

// UnbindQueue removes a binding. A binding that does not exist is not an
// error, as in RabbitMQ; a missing queue or exchange is.
func (g *exchangeGraph) UnbindQueue(u *User, owner OwnerID, d QueueBinding) error {
	argBytes, err := encodeTable(d.Arguments)
	if err != nil {
		return err
	}
	g.v.mu.Lock()
	defer g.v.mu.Unlock()
	x, _, err := g.lookupBindEnds(u, owner, d)
	if err != nil {
		return err
	}
	return g.unbindKeyLocked(x, bindingKey{destination: d.Queue, routingKey: d.RoutingKey, arguments: string(argBytes)})
}

// unbindKeyLocked removes x's binding with key, if any, and x with it if
// x is auto-delete and that was its last binding. v.mu is held.
func (g *exchangeGraph) unbindKeyLocked(x *exchange, key bindingKey) error {
	b, ok := x.bindings[key]
	if !ok {
		return nil
	}
	var changes []catalog.Change
	if c, ok := g.unbindLocked(x, b); ok {
		changes = append(changes, c)
	}
	if x.rec.AutoDelete && len(x.bindings) == 0 {
		changes = append(changes, g.dropExchangeLocked(x)...)
	}
	return g.v.persist(changes...)
}

// ExchangeBinding is exchange.bind's and exchange.unbind's arguments.
type ExchangeBinding struct {
	Destination string
	Source      string
	RoutingKey  string
	Arguments   wire.Table
}

// lookupExchangeBindEnds finds both ends of an exchange-to-exchange
// binding and checks access in RabbitMQ's order
// (rabbit_channel:binding_action_with_checks): write on the destination,
// neither end the default exchange, read on the source; then the source
// and the destination must exist. v.mu is held.
func (g *exchangeGraph) lookupExchangeBindEnds(u *User, d ExchangeBinding) (src, dst *exchange, err error) {
	if err := g.v.check(u, Write, "exchange", d.Destination); err != nil {
		return nil, nil, err
	}
	if d.Destination == "" || d.Source == "" {
		return nil, nil, wire.Errorf(wire.AccessRefused, "operation not permitted on the default exchange")
	}
	if err := g.v.check(u, Read, "exchange", d.Source); err != nil {
		return nil, nil, err
	}
	src, ok := g.exchanges[d.Source]
	if !ok {
		return nil, nil, g.v.notFound("exchange", d.Source)
	}
	dst, ok = g.exchanges[d.Destination]
	if !ok {
		return nil, nil, g.v.notFound("exchange", d.Destination)
	}
	return src, dst, nil
}

// BindExchange binds exchange d.Destination to d.Source: what the source
// routes to the binding, the destination routes on. Binding twice is a
// no-op; cycles are allowed (routing visits each exchange once).
func (g *exchangeGraph) BindExchange(u *User, d ExchangeBinding) error {
	argBytes, err := encodeTable(d.Arguments)
	if err != nil {
		return err
	}
	g.v.mu.Lock()
	defer g.v.mu.Unlock()
	src, dst, err := g.lookupExchangeBindEnds(u, d)
	if err != nil {
		return err
	}
	key := bindingKey{destination: d.Destination, toExchange: true, routingKey: d.RoutingKey, arguments: string(argBytes)}
	return g.bindLocked(src, &binding{key: key, dest: dst}, d.Arguments)
}

// UnbindExchange removes an exchange-to-exchange binding. A binding that
// does not exist is not an error; a missing exchange is.
func (g *exchangeGraph) UnbindExchange(u *User, d ExchangeBinding) error {
	argBytes, err := encodeTable(d.Arguments)
	if err != nil {
		return err
	}
	g.v.mu.Lock()
	defer g.v.mu.Unlock()
	src, _, err := g.lookupExchangeBindEnds(u, d)
	if err != nil {
		return err
	}
	return g.unbindKeyLocked(src, bindingKey{destination: d.Destination, toExchange: true, routingKey: d.RoutingKey, arguments: string(argBytes)})
}

// unbindLocked unlinks b from x and its destination and returns the store
// change deleting it, if the store holds it. v.mu is held.
func (g *exchangeGraph) unbindLocked(x *exchange, b *binding) (catalog.Change, bool) {
	x.remove(b)
	if rec, recorded := g.bindingRecord(x, b); recorded {
		return catalog.Del(rec), true
	}
	return catalog.Change{}, false
}

// bindingRecord is b's store record, and whether the store holds it: on a
// cluster every binding, for every node to route by; on a standalone
// node those kept across restarts, where both ends are.
func (g *exchangeGraph) bindingRecord(x *exchange, b *binding) (catalog.Binding, bool) {
	rec := catalog.Binding{
		Vhost:       g.v.name,
		Source:      x.rec.Name,
		Destination: b.key.destination,
		Kind:        catalog.ToQueue,
		RoutingKey:  b.key.routingKey,
		Arguments:   []byte(b.key.arguments),
	}
	if len(rec.Arguments) == 0 {
		rec.Arguments = nil
	}
	if b.dest != nil {
		rec.Kind = catalog.ToExchange
		return rec, g.v.b.shared() || (x.rec.Durable && b.dest.rec.Durable)
	}
	return rec, g.v.b.shared() || (x.rec.Durable && b.queue.rec.Durable && b.queue.owner == 0)
}

func (g *exchangeGraph) restoreBinding(rec catalog.Binding) error {
	args, err := decodeTable(rec.Arguments)
	if err != nil {
		return err
	}
	g.v.mu.Lock()
	defer g.v.mu.Unlock()
	x, ok := g.exchanges[rec.Source]
	if !ok {
		return g.v.notFound("exchange", rec.Source)
	}
	b := &binding{key: bindingKey{destination: rec.Destination, routingKey: rec.RoutingKey, arguments: string(rec.Arguments)}}
	switch rec.Kind {
	case catalog.ToExchange:
		dst, ok := g.exchanges[rec.Destination]
		if !ok {
			return g.v.notFound("exchange", rec.Destination)
		}
		b.key.toExchange = true
		b.dest = dst
	default:
		q, ok := g.v.queues[rec.Destination]
		if !ok {
			return g.v.notFound("queue", rec.Destination)
		}
		b.queue = q
	}
	x.add(b, args)
	return nil
}
