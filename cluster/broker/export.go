package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// ExportDefinitions is the cluster's definitions as a document that
// import_definitions takes, on RabbitMQ or on Warren. A cluster member
// catches up with the metadata leader first, so the document holds
// everything committed before the call, through whichever node.
func (b *Broker) ExportDefinitions(product, version string) (*Definitions, error) {
	if _, member := b.store.(Watchable); member && !b.fresh.catchUp() {
		return nil, errors.New("cannot catch up with the metadata leader: the export would miss recent changes")
	}
	snap, err := b.store.Load()
	if err != nil {
		return nil, fmt.Errorf("read the metadata: %w", err)
	}
	snap = restorable(snap)
	d := &Definitions{
		ProductName: product, ProductVersion: version,
		Users: []DefUser{}, Vhosts: []DefVhost{}, Permissions: []DefPermission{},
		TopicPermissions: []any{}, Parameters: []DefParameter{}, GlobalParameters: []any{},
		Policies: []DefPolicy{}, Queues: []DefQueue{}, Exchanges: []DefExchange{}, Bindings: []DefBinding{},
	}
	for _, u := range snap.Users {
		limits, _ := json.Marshal(nonNilLimits(u.Limits))
		d.Users = append(d.Users, DefUser{Name: u.Name, PasswordHash: u.PasswordHash, HashingAlgorithm: sha256Hashing,
			Tags: defTags(nonNilStrings(u.Tags)), Limits: limits})
	}
	for _, v := range snap.Vhosts {
		limits, _ := json.Marshal(nonNilLimits(v.Limits))
		d.Vhosts = append(d.Vhosts, DefVhost{Name: v.Name, Metadata: &vhostMetada{Tags: defTags{}, DefaultQueueType: v.DefaultQueueType}, Limits: limits})
		if len(v.Limits) > 0 {
			// RabbitMQ writes them as a runtime parameter too.
			d.Parameters = append(d.Parameters, DefParameter{Vhost: v.Name, Component: "vhost-limits", Name: "limits", Value: limits})
		}
	}
	for _, p := range snap.Permissions {
		d.Permissions = append(d.Permissions, DefPermission(p))
	}
	for _, p := range snap.Policies {
		def, err := decodeTable(p.Definition)
		if err != nil {
			return nil, fmt.Errorf("policy %s in vhost %s: %w", p.Name, p.Vhost, err)
		}
		dp := DefPolicy{Vhost: p.Vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Definition: json.RawMessage(DefinitionJSON(def)), Priority: p.Priority}
		if !p.Operator {
			d.Policies = append(d.Policies, dp)
			continue
		}
		value, _ := json.Marshal(map[string]any{"pattern": dp.Pattern, "apply-to": dp.ApplyTo, "definition": dp.Definition, "priority": dp.Priority})
		d.Parameters = append(d.Parameters, DefParameter{Vhost: p.Vhost, Component: "operator_policy", Name: p.Name, Value: value})
	}
	for _, q := range snap.Queues {
		args, err := decodeTable(q.Arguments)
		if err != nil {
			return nil, fmt.Errorf("queue %s in vhost %s: %w", q.Name, q.Vhost, err)
		}
		if args == nil {
			args = wire.Table{}
		}
		if _, ok := args["x-queue-type"]; !ok && q.Type != "" {
			args["x-queue-type"] = q.Type
		}
		d.Queues = append(d.Queues, DefQueue{Name: q.Name, Vhost: q.Vhost, Type: q.Type, Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: json.RawMessage(DefinitionJSON(args))})
	}
	for _, x := range snap.Exchanges {
		if x.Name == "" || strings.HasPrefix(x.Name, "amq.") {
			continue
		}
		args, err := decodeTable(x.Arguments)
		if err != nil {
			return nil, fmt.Errorf("exchange %s in vhost %s: %w", x.Name, x.Vhost, err)
		}
		d.Exchanges = append(d.Exchanges, DefExchange{Name: x.Name, Vhost: x.Vhost, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Arguments: json.RawMessage(DefinitionJSON(args))})
	}
	for _, bd := range snap.Bindings {
		args, err := decodeTable(bd.Arguments)
		if err != nil {
			return nil, fmt.Errorf("binding in vhost %s: %w", bd.Vhost, err)
		}
		kind := "queue"
		if bd.Kind == catalog.ToExchange {
			kind = "exchange"
		}
		d.Bindings = append(d.Bindings, DefBinding{Source: bd.Source, Vhost: bd.Vhost, Destination: bd.Destination, DestinationType: kind, RoutingKey: bd.RoutingKey, Arguments: json.RawMessage(DefinitionJSON(args))})
	}
	slices.SortFunc(d.Queues, func(a, b DefQueue) int { return strings.Compare(a.Vhost+"\x00"+a.Name, b.Vhost+"\x00"+b.Name) })
	return d, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// restorable is snap without what an import could not declare again, as
// RabbitMQ 4.3 exports definitions: exclusive queues, which belong to a
// connection. Transient exchanges and queues stay (a cluster's metadata
// holds them, remote.go), marked durable false. RabbitMQ exports the
// bindings of exclusive queues too, which its import then fails to
// declare; they are left out here.
func restorable(snap *catalog.Snapshot) *catalog.Snapshot {
	out := *snap
	type key struct{ vhost, name string }
	exclusive := map[key]bool{}
	out.Queues, out.Bindings = nil, nil
	for _, q := range snap.Queues {
		if q.Exclusive {
			exclusive[key{q.Vhost, q.Name}] = true
			continue
		}
		out.Queues = append(out.Queues, q)
	}
	for _, bd := range snap.Bindings {
		if bd.Kind == catalog.ToQueue && exclusive[key{bd.Vhost, bd.Destination}] {
			continue
		}
		out.Bindings = append(out.Bindings, bd)
	}
	return &out
}

// nonNilLimits is limits, or an empty map.
func nonNilLimits(limits map[string]int64) map[string]int64 {
	if limits == nil {
		return map[string]int64{}
	}
	return limits
}
