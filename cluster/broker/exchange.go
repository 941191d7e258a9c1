package broker

import (
	"strings"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/metadata"
)

// Exchange types the broker routes.
const (
	ExchangeDirect = "direct"
	ExchangeFanout = "fanout"
	ExchangeTopic  = "topic"
)

func knownExchangeType(t string) bool {
	return t == ExchangeDirect || t == ExchangeFanout || t == ExchangeTopic
}

// exchange is an exchange and the bindings that leave it.
type exchange struct {
	rec  metadata.Exchange
	args amqp.Table

	// bindings holds every binding by identity, for idempotent bind and
	// unbind. direct indexes direct-exchange bindings by routing key;
	// others holds the bindings of fanout and topic exchanges.
	bindings map[bindingKey]*binding
	direct   map[string][]*binding
	others   []*binding
}

// bindingKey identifies a binding: binding twice is a no-op, unbinding
// needs the same key and arguments.
type bindingKey struct {
	destination string
	routingKey  string
	arguments   string // encoded field table
}

type binding struct {
	key   bindingKey
	words []string // topic pattern split on '.'
	queue *Queue
}

func newExchange(rec metadata.Exchange, args amqp.Table) *exchange {
	return &exchange{
		rec:      rec,
		args:     args,
		bindings: make(map[bindingKey]*binding),
		direct:   make(map[string][]*binding),
	}
}

func (x *exchange) isDefault() bool { return x.rec.Name == "" }

func (x *exchange) add(b *binding) {
	x.bindings[b.key] = b
	switch x.rec.Type {
	case ExchangeDirect:
		x.direct[b.key.routingKey] = append(x.direct[b.key.routingKey], b)
	case ExchangeTopic:
		b.words = splitTopic(b.key.routingKey)
		x.others = append(x.others, b)
	default:
		x.others = append(x.others, b)
	}
}

func (x *exchange) remove(b *binding) {
	delete(x.bindings, b.key)
	if x.rec.Type == ExchangeDirect {
		list := removeBinding(x.direct[b.key.routingKey], b)
		if len(list) == 0 {
			delete(x.direct, b.key.routingKey)
		} else {
			x.direct[b.key.routingKey] = list
		}
		return
	}
	x.others = removeBinding(x.others, b)
}

func removeBinding(list []*binding, b *binding) []*binding {
	for i, e := range list {
		if e == b {
			last := len(list) - 1
			copy(list[i:], list[i+1:])
			list[last] = nil
			return list[:last]
		}
	}
	return list
}

// route appends the queues that a message with routingKey reaches through
// x to out, each queue once.
func (x *exchange) route(routingKey string, out []*Queue) []*Queue {
	switch x.rec.Type {
	case ExchangeDirect:
		for _, b := range x.direct[routingKey] {
			out = appendUnique(out, b.queue)
		}
	case ExchangeFanout:
		for _, b := range x.others {
			out = appendUnique(out, b.queue)
		}
	case ExchangeTopic:
		var words []string
		for _, b := range x.others {
			if words == nil {
				words = splitTopic(routingKey)
			}
			if topicMatch(b.words, words) {
				out = appendUnique(out, b.queue)
			}
		}
	}
	return out
}

// appendUnique adds q unless present. Fan-out sets are small, so a linear
// scan beats a map allocation per publish.
func appendUnique(out []*Queue, q *Queue) []*Queue {
	for _, e := range out {
		if e == q {
			return out
		}
	}
	return append(out, q)
}

// splitTopic splits a routing key or pattern into words. As in RabbitMQ,
// the empty key has no words at all.
func splitTopic(key string) []string {
	if key == "" {
		return []string{}
	}
	return strings.Split(key, ".")
}

// topicMatch reports whether pattern words match key words: '*' is one
// word, '#' zero or more.
func topicMatch(pattern, key []string) bool {
	for len(pattern) > 0 {
		p := pattern[0]
		if p == "#" {
			rest := pattern[1:]
			// Collapse consecutive '#': they match the same as one.
			for len(rest) > 0 && rest[0] == "#" {
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(key); i++ {
				if topicMatch(rest, key[i:]) {
					return true
				}
			}
			return false
		}
		if len(key) == 0 {
			return false
		}
		if p != "*" && p != key[0] {
			return false
		}
		pattern, key = pattern[1:], key[1:]
	}
	return len(key) == 0
}
