package broker

import (
	"strings"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// Exchange types the broker routes: AMQP's four and the two RabbitMQ 4.3
// has in its core (exchangetypes.go).
const (
	ExchangeDirect      = "direct"
	ExchangeFanout      = "fanout"
	ExchangeTopic       = "topic"
	ExchangeHeaders     = "headers"
	ExchangeModulusHash = "x-modulus-hash"
	ExchangeLocalRandom = "x-local-random"
)

func knownExchangeType(t string) bool {
	switch t {
	case ExchangeDirect, ExchangeFanout, ExchangeTopic, ExchangeHeaders, ExchangeModulusHash, ExchangeLocalRandom:
		return true
	}
	return false
}

// exchange is an exchange and the bindings that leave it.
type exchange struct {
	rec  catalog.Exchange
	args wire.Table
	// alternate is the alternate-exchange argument: where messages this
	// exchange routes nowhere go instead. Empty for none.
	alternate string

	// bindings holds every binding leaving x by identity, for idempotent
	// bind and unbind. direct indexes direct-exchange bindings by routing
	// key; others holds the bindings of the other types.
	bindings map[bindingKey]*binding
	direct   map[string][]*binding
	others   []*binding
	// toExchanges counts the bindings in bindings whose destination is
	// an exchange; while it is zero routing needs no work list.
	toExchanges int
	// incoming are the exchange-to-exchange bindings that end at x, with
	// their source, to drop them with x.
	incoming map[*binding]*exchange
	// spread are an x-modulus-hash exchange's destinations, one binding
	// each, in a stable order (exchangetypes.go).
	spread []*binding
}

// bindingKey identifies a binding: binding twice is a no-op, unbinding
// needs the same key and arguments.
type bindingKey struct {
	destination string
	toExchange  bool // destination names an exchange, not a queue
	routingKey  string
	arguments   string // encoded field table
}

// binding leads from an exchange to a queue or (dest set) an exchange.
type binding struct {
	key     bindingKey
	words   []string      // topic pattern split on '.'
	headers *headersMatch // headers exchanges: the compiled arguments
	queue   *Queue
	dest    *exchange
}

func newExchange(rec catalog.Exchange, args wire.Table) *exchange {
	x := &exchange{
		rec:      rec,
		args:     args,
		bindings: make(map[bindingKey]*binding),
		direct:   make(map[string][]*binding),
		incoming: make(map[*binding]*exchange),
	}
	x.alternate, _ = args["alternate-exchange"].(string)
	return x
}

func (x *exchange) isDefault() bool { return x.rec.Name == "" }

// add links b, whose arguments decode to args, to x.
func (x *exchange) add(b *binding, args wire.Table) {
	x.bindings[b.key] = b
	if b.dest != nil {
		x.toExchanges++
		b.dest.incoming[b] = x
	} else {
		b.queue.bindings[b] = x
	}
	switch x.rec.Type {
	case ExchangeDirect:
		x.direct[b.key.routingKey] = append(x.direct[b.key.routingKey], b)
	case ExchangeTopic:
		b.words = splitTopic(b.key.routingKey)
		x.others = append(x.others, b)
	case ExchangeHeaders:
		b.headers, _ = compileHeadersMatch(args) // validated when bound
		x.others = append(x.others, b)
	default:
		x.others = append(x.others, b)
	}
	if x.rec.Type == ExchangeModulusHash {
		x.spread = spreadAdd(x.spread, b)
	}
}

func (x *exchange) remove(b *binding) {
	delete(x.bindings, b.key)
	if b.dest != nil {
		x.toExchanges--
		delete(b.dest.incoming, b)
	} else {
		delete(b.queue.bindings, b)
	}
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
	if x.rec.Type == ExchangeModulusHash {
		x.spread = spreadRemove(x.spread, b, x.others)
	}
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

// route appends the queues that a message with routing keys keys (its
// routing key, then those of its CC and BCC headers) and headers reaches
// directly through x to out, each queue once, and the exchanges it
// reaches to xs. matched says whether any binding matched at all, which
// is what decides whether the alternate exchange is tried.
func (x *exchange) route(keys []string, headers wire.Table, out []*Queue, xs []*exchange) ([]*Queue, []*exchange, bool) {
	matched := false
	switch x.rec.Type {
	case ExchangeDirect:
		for _, k := range keys {
			for _, b := range x.direct[k] {
				matched = true
				out, xs = b.appendTo(out, xs)
			}
		}
	case ExchangeFanout:
		for _, b := range x.others {
			matched = true
			out, xs = b.appendTo(out, xs)
		}
	case ExchangeTopic:
		for _, k := range keys {
			var words []string
			for _, b := range x.others {
				if words == nil {
					words = splitTopic(k)
				}
				if topicMatch(b.words, words) {
					matched = true
					out, xs = b.appendTo(out, xs)
				}
			}
		}
	case ExchangeHeaders:
		for _, b := range x.others {
			if b.headers.match(headers) {
				matched = true
				out, xs = b.appendTo(out, xs)
			}
		}
	case ExchangeModulusHash:
		if len(x.spread) > 0 {
			matched = true
			out, xs = x.spread[moduloHash(keys)%uint64(len(x.spread))].appendTo(out, xs)
		}
	case ExchangeLocalRandom:
		if b := localRandom(x.others); b != nil {
			matched = true
			out, xs = b.appendTo(out, xs)
		}
	}
	return out, xs, matched
}

// appendTo adds b's destination to out or xs.
func (b *binding) appendTo(out []*Queue, xs []*exchange) ([]*Queue, []*exchange) {
	if b.dest == nil {
		return appendUnique(out, b.queue), xs
	}
	for _, e := range xs {
		if e == b.dest {
			return out, xs
		}
	}
	return out, append(xs, b.dest)
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
