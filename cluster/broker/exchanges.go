package broker

import (
	"strings"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/metadata"
)

// ExchangeDeclare is exchange.declare's arguments.
type ExchangeDeclare struct {
	Name       string
	Type       string
	Passive    bool
	Durable    bool
	AutoDelete bool
	Internal   bool
	Arguments  amqp.Table
}

func describeExchange(name, vhost string) string {
	return "exchange '" + name + "' in vhost '" + vhost + "'"
}

// comparedExchangeArgs are compared on redeclaration, as in RabbitMQ.
var comparedExchangeArgs = []string{"alternate-exchange"}

// DeclareExchange declares (or, passively, checks) an exchange.
func (v *Vhost) DeclareExchange(u *User, d ExchangeDeclare) error {
	if d.Name == "" {
		return amqp.Errorf(amqp.AccessRefused, "operation not permitted on the default exchange")
	}
	if d.Passive {
		// Permission first, as in RabbitMQ.
		if err := v.checkAny(u, "exchange", d.Name); err != nil {
			return err
		}
		v.mu.RLock()
		_, ok := v.exchanges[d.Name]
		v.mu.RUnlock()
		if !ok {
			return v.notFound("exchange", d.Name)
		}
		return nil
	}
	if !knownExchangeType(d.Type) {
		return amqp.Errorf(amqp.PreconditionFailed, "unknown exchange type '%s'", d.Type)
	}
	if err := v.check(u, Configure, "exchange", d.Name); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if x, ok := v.exchanges[d.Name]; ok {
		what := describeExchange(d.Name, v.name)
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
		return amqp.Errorf(amqp.AccessRefused, "exchange name '%s' contains reserved prefix 'amq.*'", d.Name)
	}
	argBytes, err := encodeTable(d.Arguments)
	if err != nil {
		return err
	}
	rec := metadata.Exchange{
		Vhost: v.name, Name: d.Name, Type: d.Type,
		Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal,
		Arguments: argBytes,
	}
	if rec.Durable {
		if err := v.persist(metadata.Put(rec)); err != nil {
			return err
		}
	}
	v.exchanges[d.Name] = newExchange(rec, d.Arguments)
	return nil
}

func (v *Vhost) restoreExchange(rec metadata.Exchange) error {
	args, err := decodeTable(rec.Arguments)
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.exchanges[rec.Name] = newExchange(rec, args)
	return nil
}

// DeleteExchange deletes an exchange and its bindings. Deleting one that
// does not exist succeeds, as in RabbitMQ.
func (v *Vhost) DeleteExchange(u *User, name string, ifUnused bool) error {
	if name == "" {
		return amqp.Errorf(amqp.AccessRefused, "operation not permitted on the default exchange")
	}
	if strings.HasPrefix(name, "amq.") {
		return amqp.Errorf(amqp.AccessRefused, "deletion of system exchange '%s' in vhost '%s' not allowed", name, v.name)
	}
	if err := v.check(u, Configure, "exchange", name); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	x, ok := v.exchanges[name]
	if !ok {
		return nil
	}
	if ifUnused && len(x.bindings) > 0 {
		return amqp.Errorf(amqp.PreconditionFailed, "%s in use", describeExchange(name, v.name))
	}
	return v.persist(v.dropExchangeLocked(x)...)
}

// dropExchangeLocked unlinks x and its bindings and returns the store
// changes that go with it. v.mu is held.
func (v *Vhost) dropExchangeLocked(x *exchange) []metadata.Change {
	var changes []metadata.Change
	for _, b := range x.bindings {
		if c, ok := v.unbindLocked(x, b); ok {
			changes = append(changes, c)
		}
	}
	if x.rec.Durable {
		changes = append(changes, metadata.Del(x.rec))
	}
	delete(v.exchanges, x.rec.Name)
	return changes
}

// Route appends to out the queues a message published to exchangeName
// with routingKey reaches. The exchange must exist and not be internal.
func (v *Vhost) Route(exchangeName, routingKey string, out []*Queue) ([]*Queue, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	x, ok := v.exchanges[exchangeName]
	if !ok {
		return out, v.notFound("exchange", exchangeName)
	}
	if x.rec.Internal {
		return out, amqp.Errorf(amqp.AccessRefused, "cannot publish to internal %s", describeExchange(exchangeName, v.name))
	}
	if x.isDefault() {
		if q, ok := v.queues[routingKey]; ok {
			out = append(out, q)
		}
		return out, nil
	}
	return x.route(routingKey, out), nil
}

// CheckPublish checks that u may publish to exchangeName (write access).
// The channel caches the answer per exchange.
func (v *Vhost) CheckPublish(u *User, exchangeName string) error {
	return v.check(u, Write, "exchange", exchangeName)
}
