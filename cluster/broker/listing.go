package broker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/raftq/queue"
)

// What an operator lists and does to a vhost's exchanges, bindings and
// queues from outside any connection, as rabbitmqctl's list_exchanges,
// list_bindings, delete_queue and purge_queue do. Listings read this
// node's model, transient entities included.

// ExchangeInfo is an exchange as listed.
type ExchangeInfo struct {
	Vhost, Name, Type             string
	Durable, AutoDelete, Internal bool
	Arguments                     wire.Table
}

// Exchanges lists the exchanges of vhost ("" for every vhost), the
// predeclared ones with them, by vhost then name.
func (b *Broker) Exchanges(vhost string) []ExchangeInfo {
	var out []ExchangeInfo
	for _, v := range b.selectVhosts(vhost) {
		v.mu.RLock()
		for _, x := range v.exchanges {
			out = append(out, ExchangeInfo{Vhost: v.name, Name: x.rec.Name, Type: x.rec.Type,
				Durable: x.rec.Durable, AutoDelete: x.rec.AutoDelete, Internal: x.rec.Internal, Arguments: x.args})
		}
		v.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b ExchangeInfo) int { return cmp.Or(cmp.Compare(a.Vhost, b.Vhost), cmp.Compare(a.Name, b.Name)) })
	return out
}

// BindingInfo is a binding as listed. Source "" is the default exchange,
// which binds every queue under its own name, as RabbitMQ lists it.
type BindingInfo struct {
	Vhost, Source, Destination string
	ToExchange                 bool
	RoutingKey                 string
	Arguments                  wire.Table
}

// Bindings lists the bindings of vhost ("" for every vhost), by vhost,
// source, destination and routing key.
func (b *Broker) Bindings(vhost string) []BindingInfo {
	var out []BindingInfo
	for _, v := range b.selectVhosts(vhost) {
		v.mu.RLock()
		for name := range v.queues {
			out = append(out, BindingInfo{Vhost: v.name, Destination: name, RoutingKey: name})
		}
		for _, x := range v.exchanges {
			for _, bd := range x.bindings {
				args, _ := decodeTable([]byte(bd.key.arguments))
				out = append(out, BindingInfo{Vhost: v.name, Source: x.rec.Name, Destination: bd.key.destination,
					ToExchange: bd.key.toExchange, RoutingKey: bd.key.routingKey, Arguments: args})
			}
		}
		v.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b BindingInfo) int {
		return cmp.Or(cmp.Compare(a.Vhost, b.Vhost), cmp.Compare(a.Source, b.Source),
			cmp.Compare(a.Destination, b.Destination), cmp.Compare(a.RoutingKey, b.RoutingKey))
	})
	return out
}

// DeleteQueue deletes a queue as rabbitmqctl delete_queue does, with the
// flags queue.delete has; it returns the messages it held. Unlike
// queue.delete, a queue that does not exist is an error (NOT_FOUND), so
// that a mistyped name is noticed.
func (b *Broker) DeleteQueue(vhost, name string, ifUnused, ifEmpty bool) (uint32, error) {
	v := b.vhost(vhost)
	if v == nil {
		return 0, fmt.Errorf("%w: %s", ErrNoVhost, vhost)
	}
	q, err := v.LookupQueue(nil, 0, name, Configure)
	if err != nil {
		return 0, err
	}
	n, err := v.deleteQueue(q, ifUnused, ifEmpty)
	if err == nil {
		b.log.Info("queue deleted by an operator", "vhost", vhost, "queue", name, "messages", n)
	}
	return n, err
}

// PurgeQueue removes a queue's ready messages as rabbitmqctl purge_queue
// does, and returns how many.
func (b *Broker) PurgeQueue(vhost, name string) (uint32, error) {
	v := b.vhost(vhost)
	if v == nil {
		return 0, fmt.Errorf("%w: %s", ErrNoVhost, vhost)
	}
	n, err := v.PurgeQueue(nil, 0, name)
	if err == nil {
		b.log.Info("queue purged by an operator", "vhost", vhost, "queue", name, "messages", n)
	}
	return n, err
}

// QueueSummary is one queue as operators see it.
type QueueSummary struct {
	Record    catalog.Queue
	Exclusive bool
	Engine    queue.Queue
}

// Queues lists the queues of vhost ("" for every vhost), sorted by vhost
// and name.
func (b *Broker) Queues(vhost string) []QueueSummary {
	var out []QueueSummary
	for _, v := range b.selectVhosts(vhost) {
		v.mu.RLock()
		for _, q := range v.queues {
			rec := q.rec
			rec.Vhost = v.name
			out = append(out, QueueSummary{Record: rec, Exclusive: q.owner != 0, Engine: q.engine})
		}
		v.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b QueueSummary) int {
		if c := strings.Compare(a.Record.Vhost, b.Record.Vhost); c != 0 {
			return c
		}
		return strings.Compare(a.Record.Name, b.Record.Name)
	})
	return out
}

// QueueRecord is the record of queue name in vhost. Not found on a node
// that may be behind, it catches up and looks again (an operator's command
// right after this node restarted must not find the queue missing).
func (b *Broker) QueueRecord(vhost, name string) (catalog.Queue, bool) {
	rec, ok := b.queueRecord(vhost, name)
	if !ok && b.fresh.lookAgainAfterMiss() {
		rec, ok = b.queueRecord(vhost, name)
	}
	return rec, ok
}

func (b *Broker) queueRecord(vhost, name string) (catalog.Queue, bool) {
	v := b.vhost(vhost)
	if v == nil {
		return catalog.Queue{}, false
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	q, ok := v.queues[name]
	if !ok {
		return catalog.Queue{}, false
	}
	return q.rec, true
}
