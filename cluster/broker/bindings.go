package broker

import (
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/metadata"
)

// QueueBinding is queue.bind's and queue.unbind's arguments.
type QueueBinding struct {
	Queue      string
	Exchange   string
	RoutingKey string
	Arguments  amqp.Table
}

// lookupBindEnds finds both ends of a binding and checks access: write on
// the queue, read on the exchange, as RabbitMQ does. v.mu is held.
func (v *Vhost) lookupBindEnds(u *User, owner OwnerID, d QueueBinding) (*exchange, *Queue, error) {
	// RabbitMQ's order (binding_action_with_checks): write on the queue,
	// the default exchange, read on the exchange; only then existence and
	// exclusivity.
	if err := v.check(u, Write, "queue", d.Queue); err != nil {
		return nil, nil, err
	}
	if d.Exchange == "" {
		return nil, nil, amqp.Errorf(amqp.AccessRefused, "operation not permitted on the default exchange")
	}
	if err := v.check(u, Read, "exchange", d.Exchange); err != nil {
		return nil, nil, err
	}
	q, ok := v.queues[d.Queue]
	if !ok {
		return nil, nil, v.notFound("queue", d.Queue)
	}
	x, ok := v.exchanges[d.Exchange]
	if !ok {
		return nil, nil, v.notFound("exchange", d.Exchange)
	}
	if err := v.accessible(q, owner); err != nil {
		return nil, nil, err
	}
	return x, q, nil
}

// BindQueue binds a queue to an exchange. Binding twice is a no-op.
func (v *Vhost) BindQueue(u *User, owner OwnerID, d QueueBinding) error {
	argBytes, err := encodeTable(d.Arguments)
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	x, q, err := v.lookupBindEnds(u, owner, d)
	if err != nil {
		return err
	}
	key := bindingKey{destination: d.Queue, routingKey: d.RoutingKey, arguments: string(argBytes)}
	if _, ok := x.bindings[key]; ok {
		return nil
	}
	b := &binding{key: key, queue: q}
	if rec, durable := bindingRecord(v.name, x, q, b); durable {
		if err := v.persist(metadata.Put(rec)); err != nil {
			return err
		}
	}
	x.add(b)
	q.bindings[b] = x
	return nil
}

// UnbindQueue removes a binding. A binding that does not exist is not an
// error, as in RabbitMQ; a missing queue or exchange is.
func (v *Vhost) UnbindQueue(u *User, owner OwnerID, d QueueBinding) error {
	argBytes, err := encodeTable(d.Arguments)
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	x, _, err := v.lookupBindEnds(u, owner, d)
	if err != nil {
		return err
	}
	b, ok := x.bindings[bindingKey{destination: d.Queue, routingKey: d.RoutingKey, arguments: string(argBytes)}]
	if !ok {
		return nil
	}
	var changes []metadata.Change
	if c, ok := v.unbindLocked(x, b); ok {
		changes = append(changes, c)
	}
	if x.rec.AutoDelete && len(x.bindings) == 0 {
		changes = append(changes, v.dropExchangeLocked(x)...)
	}
	return v.persist(changes...)
}

// unbindLocked unlinks b and returns the store change deleting it, if it
// was durable. v.mu is held.
func (v *Vhost) unbindLocked(x *exchange, b *binding) (metadata.Change, bool) {
	x.remove(b)
	delete(b.queue.bindings, b)
	if rec, durable := bindingRecord(v.name, x, b.queue, b); durable {
		return metadata.Del(rec), true
	}
	return metadata.Change{}, false
}

// bindingRecord is b's store record; a binding is kept across restarts
// when both its ends are.
func bindingRecord(vhost string, x *exchange, q *Queue, b *binding) (metadata.Binding, bool) {
	rec := metadata.Binding{
		Vhost:       vhost,
		Source:      x.rec.Name,
		Destination: q.rec.Name,
		Kind:        metadata.ToQueue,
		RoutingKey:  b.key.routingKey,
		Arguments:   []byte(b.key.arguments),
	}
	if len(rec.Arguments) == 0 {
		rec.Arguments = nil
	}
	return rec, x.rec.Durable && q.rec.Durable && q.owner == 0
}

func (v *Vhost) restoreBinding(rec metadata.Binding) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	x, ok := v.exchanges[rec.Source]
	if !ok {
		return v.notFound("exchange", rec.Source)
	}
	q, ok := v.queues[rec.Destination]
	if !ok {
		return v.notFound("queue", rec.Destination)
	}
	b := &binding{key: bindingKey{destination: rec.Destination, routingKey: rec.RoutingKey, arguments: string(rec.Arguments)}, queue: q}
	x.add(b)
	q.bindings[b] = x
	return nil
}
