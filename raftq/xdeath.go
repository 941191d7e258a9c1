package raftq

import (
	"time"

	"github.com/warrenmq/warren/amqp/wire"
)

// Death is one dead-lettering of a message: the inputs of its x-death
// entry, from an EffectDeadLetter and the message it names.
type Death struct {
	// Queue is the name of the queue the message was dead-lettered from.
	Queue  string
	Reason Reason
	// Time is when, in Unix milliseconds (EffectDeadLetter's Time).
	Time int64
	// Exchange and RoutingKeys are where the message was published before
	// this dead-lettering: its routing key and CC header's keys, without
	// BCC's.
	Exchange    string
	RoutingKeys []string
	// Expiration is the message's expiration property, if it had one. The
	// runtime removes the property from the dead-lettered message, so that
	// it does not expire again in the queues it goes to, and x-death keeps
	// it as original-expiration.
	Expiration    string
	HasExpiration bool
}

// RecordDeath returns a copy of a message's headers with d recorded, as
// RabbitMQ 4.3 records a death for an AMQP 0-9-1 message (mc:record_death/3
// and mc_amqpl:protocol_state/2; the dead-lettering guide's "Dead-Lettered
// Effects on Messages"):
//
//   - x-death is an array of tables, most recent first, one per (queue,
//     reason). An existing entry gets count+1 and moves to the front; its
//     time, exchange, routing-keys and original-expiration stay those of the
//     first death. A new entry has count 1 (long), reason, queue, time
//     (timestamp, whole seconds), exchange, routing-keys (array of longstr)
//     and, if the message had an expiration, original-expiration (longstr).
//   - x-first-death-queue, -reason and -exchange are set at the first death
//     and never changed; x-last-death-queue, -reason and -exchange are set at
//     every death.
//
// headers is not modified. Values use the types amqp.DecodeTable produces,
// so the result encodes as RabbitMQ would send it: count int64, time
// time.Time in UTC, routing-keys []any of string, each entry an amqp.Table.
// Unlike RabbitMQ, which keeps its death history beside the message and
// ignores an x-death header a client published, Warren keeps the message
// as published and so reads the history back from the header.
func RecordDeath(headers wire.Table, d Death) wire.Table {
	out := make(wire.Table, len(headers)+7)
	for k, v := range headers {
		out[k] = v
	}
	reason := d.Reason.String()
	old, _ := headers["x-death"].([]any)
	deaths := make([]any, 1, len(old)+1)
	first := true
	var found wire.Table
	for _, e := range old {
		t := asTable(e)
		if t != nil {
			first = false
		}
		if found == nil && t != nil && t["queue"] == d.Queue && t["reason"] == reason {
			found = t
			continue
		}
		deaths = append(deaths, e)
	}
	if found != nil {
		entry := make(wire.Table, len(found))
		for k, v := range found {
			entry[k] = v
		}
		n, _ := intValue(found["count"])
		entry["count"] = n + 1
		deaths[0] = entry
	} else {
		keys := make([]any, len(d.RoutingKeys))
		for i, k := range d.RoutingKeys {
			keys[i] = k
		}
		entry := wire.Table{
			"count":        int64(1),
			"reason":       reason,
			"queue":        d.Queue,
			"time":         time.Unix(d.Time/1000, 0).UTC(),
			"exchange":     d.Exchange,
			"routing-keys": keys,
		}
		if d.HasExpiration {
			entry["original-expiration"] = d.Expiration
		}
		deaths[0] = entry
	}
	out["x-death"] = deaths
	if first {
		out["x-first-death-queue"] = d.Queue
		out["x-first-death-reason"] = reason
		out["x-first-death-exchange"] = d.Exchange
	}
	out["x-last-death-queue"] = d.Queue
	out["x-last-death-reason"] = reason
	out["x-last-death-exchange"] = d.Exchange
	return out
}

func asTable(v any) wire.Table {
	switch t := v.(type) {
	case wire.Table:
		return t
	case map[string]any:
		return t
	}
	return nil
}
