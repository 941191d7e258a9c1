package broker

import (
	"cmp"
	"hash/fnv"
	"math/rand/v2"
	"slices"

	"github.com/warrenmq/warren/amqp/wire"
)

// The two exchange types RabbitMQ 4.3 has in its core beside AMQP's four.
//
// x-modulus-hash (rabbit_exchange_type_modulus_hash, formerly the sharding
// plugin's) sends each message to one of the exchange's destinations,
// whatever the binding keys: the hash of its routing keys modulo the
// number of destinations, the destinations in a stable order (exchanges
// before queues, each by name, as RabbitMQ sorts their resource records),
// so the same key goes to the same queue on every node and across
// restarts while the bindings stay the same. RabbitMQ hashes with
// erlang:phash2; Warren with FNV-1a and murmur3's finaliser, so the queue a given key lands in
// differs between the two, the spreading and its stability do not.
//
// x-local-random (rabbit_exchange_type_local_random) sends each message to
// one classic queue bound to it that lives on the node the message was
// published through, picked at random; none there, no route. Its bindings
// must have an empty key and lead to a classic queue.

// hashRange is phash2's range in RabbitMQ's modulus hash: 2^27.
const hashRange = 1 << 27

// moduloHash is the hash of a message's routing keys (its routing key,
// then its CC and BCC keys) in [0, hashRange).
func moduloHash(keys []string) uint64 {
	h := fnv.New64a()
	for i, k := range keys {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(k))
	}
	// FNV-1a's low bits barely change between keys that differ in their
	// last characters (order-1, order-2, ...), and the modulus reads
	// them: murmur3's finaliser spreads every bit over all of them.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x % hashRange
}

// cmpDestination orders destinations as RabbitMQ sorts their resource
// records: exchanges before queues, each kind by name.
func cmpDestination(a, b *binding) int {
	if a.key.toExchange != b.key.toExchange {
		if a.key.toExchange {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.key.destination, b.key.destination)
}

// spreadAdd is spread, one binding per destination in cmpDestination's
// order, with b's destination in it.
func spreadAdd(spread []*binding, b *binding) []*binding {
	i, found := slices.BinarySearchFunc(spread, b, cmpDestination)
	if found {
		return spread
	}
	return slices.Insert(spread, i, b)
}

// spreadRemove is spread once b has gone from the exchange, whose
// bindings are now others: b's destination stays while another binding
// leads there.
func spreadRemove(spread []*binding, b *binding, others []*binding) []*binding {
	i, found := slices.BinarySearchFunc(spread, b, cmpDestination)
	if !found || spread[i] != b {
		return spread
	}
	for _, o := range others {
		if cmpDestination(o, b) == 0 {
			spread[i] = o
			return spread
		}
	}
	return slices.Delete(spread, i, i+1)
}

// localRandom picks one of bindings' queues that live on this node, at
// random; nil if none does.
func localRandom(bindings []*binding) *binding {
	n := 0
	for _, b := range bindings {
		if b.local() {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	pick := rand.IntN(n)
	for _, b := range bindings {
		if b.local() {
			if pick == 0 {
				return b
			}
			pick--
		}
	}
	return nil
}

// local reports whether b leads to a queue whose messages live on this
// node.
func (b *binding) local() bool {
	q := b.queue
	if q == nil {
		return false
	}
	if !q.vhost.b.shared() || len(q.rec.Members) == 0 {
		return true
	}
	return slices.Contains(q.rec.Members, q.vhost.b.cfg.NodeID)
}

// validateLocalRandomBinding is rabbit_exchange_type_local_random's
// validate_binding/2: an empty key, to a classic queue (406 otherwise,
// as rabbit_channel answers binding_invalid).
func validateLocalRandomBinding(b *binding) error {
	switch {
	case b.key.routingKey != "":
		return wire.Errorf(wire.PreconditionFailed, "Non empty binding '%s' key not permitted", b.key.routingKey)
	case b.queue == nil:
		return wire.Errorf(wire.PreconditionFailed, "Destination not found")
	case b.queue.rec.Type != QueueTypeClassic:
		return wire.Errorf(wire.PreconditionFailed, "Queue type rabbit_%s_queue not valid for this exchange type", b.queue.rec.Type)
	}
	return nil
}
