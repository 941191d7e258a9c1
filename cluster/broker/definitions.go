package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// Definitions is RabbitMQ's definitions document, as rabbitmqctl
// export_definitions writes it and import_definitions reads it (and the
// management API's /api/definitions): users with their password hashes,
// vhosts, permissions, policies (operator policies among the parameters),
// and the durable queues, exchanges and bindings. An operator moves a
// RabbitMQ setup to Warren with it, or back. Fields Warren has no use for
// are kept as they came, so a document survives a round trip through its
// types.
type Definitions struct {
	ProductName      string          `json:"product_name,omitempty"`
	ProductVersion   string          `json:"product_version,omitempty"`
	RabbitVersion    string          `json:"rabbit_version,omitempty"`
	RabbitMQVersion  string          `json:"rabbitmq_version,omitempty"`
	Users            []DefUser       `json:"users"`
	Vhosts           []DefVhost      `json:"vhosts"`
	Permissions      []DefPermission `json:"permissions"`
	TopicPermissions []any           `json:"topic_permissions"`
	Parameters       []DefParameter  `json:"parameters"`
	GlobalParameters []any           `json:"global_parameters"`
	Policies         []DefPolicy     `json:"policies"`
	Queues           []DefQueue      `json:"queues"`
	Exchanges        []DefExchange   `json:"exchanges"`
	Bindings         []DefBinding    `json:"bindings"`
}

// DefUser is a user. Tags are a list, or (RabbitMQ before 3.9) one
// comma-separated string.
type DefUser struct {
	Name             string          `json:"name"`
	PasswordHash     string          `json:"password_hash"`
	HashingAlgorithm string          `json:"hashing_algorithm,omitempty"`
	Tags             defTags         `json:"tags"`
	Limits           json.RawMessage `json:"limits,omitempty"`
}

// sha256Hashing is the one password hashing Warren checks
// (HashPassword); RabbitMQ's default since 3.6.
const sha256Hashing = "rabbit_password_hashing_sha256"

type defTags []string

func (t *defTags) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*t = list
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("tags: a list or a comma-separated string: %w", err)
	}
	*t = nil
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*t = append(*t, x)
		}
	}
	return nil
}

// DefVhost is a vhost. Its default queue type is under metadata in
// RabbitMQ 3.11 and later, at the top level in some tools' documents.
type DefVhost struct {
	Name             string       `json:"name"`
	Description      string       `json:"description,omitempty"`
	Tags             defTags      `json:"tags,omitempty"`
	DefaultQueueType string       `json:"default_queue_type,omitempty"`
	Metadata         *vhostMetada `json:"metadata,omitempty"`
	// Limits are its limits: an object as RabbitMQ 4.x writes them
	// ({"max-queues": 10}), or pairs as 3.x does ([["max-queues", 10]]);
	// both also write them as a vhost-limits parameter.
	Limits json.RawMessage `json:"limits,omitempty"`
}

// limits are v's limits, none if the document gives none.
func (v DefVhost) limits() (map[string]int64, error) { return readLimits(v.Limits, ParseVhostLimits) }

// readLimits reads a vhost's or a user's limits from a definitions
// document: an object as RabbitMQ 4.x writes it, or [name, value] pairs
// as 3.x does; none for nothing, null, [] or {}.
func readLimits(raw json.RawMessage, parse func(string) (map[string]int64, error)) (map[string]int64, error) {
	var pairs [][2]json.RawMessage
	if len(raw) > 0 && raw[0] == '[' {
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return nil, invalidAccess("limits: a JSON object, or a list of [name, value] pairs: %v", err)
		}
		obj := map[string]json.RawMessage{}
		for _, p := range pairs {
			var k string
			if err := json.Unmarshal(p[0], &k); err != nil {
				return nil, invalidAccess("limits: a limit's name must be a string: %s", p[0])
			}
			obj[k] = p[1]
		}
		raw, _ = json.Marshal(obj)
	}
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
		return nil, nil
	}
	return parse(string(raw))
}

// vhostMetada's tags are a list, or "" (RabbitMQ 3.10 writes both).
type vhostMetada struct {
	Description      string  `json:"description"`
	Tags             defTags `json:"tags"`
	DefaultQueueType string  `json:"default_queue_type,omitempty"`
}

func (v DefVhost) queueType() string {
	if v.Metadata != nil && v.Metadata.DefaultQueueType != "" {
		return v.Metadata.DefaultQueueType
	}
	return v.DefaultQueueType
}

// DefPermission is a user's access to a vhost.
type DefPermission struct {
	User      string `json:"user"`
	Vhost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// DefPolicy is a policy.
type DefPolicy struct {
	Vhost      string          `json:"vhost"`
	Name       string          `json:"name"`
	Pattern    string          `json:"pattern"`
	ApplyTo    string          `json:"apply-to"`
	Definition json.RawMessage `json:"definition"`
	Priority   int             `json:"priority"`
}

// DefParameter is a runtime parameter: Warren takes operator policies
// (component operator_policy, its value a policy without vhost and name)
// and vhost limits (component vhost-limits), and reports the others
// (federation, shovels) as not imported.
type DefParameter struct {
	Vhost     string          `json:"vhost"`
	Component string          `json:"component"`
	Name      string          `json:"name"`
	Value     json.RawMessage `json:"value"`
}

// DefQueue is a durable queue; its type is its arguments' x-queue-type
// (RabbitMQ 3.10 and later repeat it as type).
type DefQueue struct {
	Name       string          `json:"name"`
	Vhost      string          `json:"vhost"`
	Type       string          `json:"type,omitempty"`
	Durable    bool            `json:"durable"`
	AutoDelete bool            `json:"auto_delete"`
	Arguments  json.RawMessage `json:"arguments"`
}

// DefExchange is a durable exchange.
type DefExchange struct {
	Name       string          `json:"name"`
	Vhost      string          `json:"vhost"`
	Type       string          `json:"type"`
	Durable    bool            `json:"durable"`
	AutoDelete bool            `json:"auto_delete"`
	Internal   bool            `json:"internal"`
	Arguments  json.RawMessage `json:"arguments"`
}

// DefBinding binds an exchange to a queue or to another exchange.
type DefBinding struct {
	Source          string          `json:"source"`
	Vhost           string          `json:"vhost"`
	Destination     string          `json:"destination"`
	DestinationType string          `json:"destination_type"`
	RoutingKey      string          `json:"routing_key"`
	Arguments       json.RawMessage `json:"arguments"`
}

// ImportReport is what an import did: how many of each kind it created or
// updated, and each item it could not take, with the reason.
type ImportReport struct {
	Imported map[string]int // by kind: users, vhosts, permissions, ...
	Problems []string
}

func (r *ImportReport) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// ImportDefinitions adds what d defines, as rabbitmqctl
// import_definitions does: what exists is updated (users, permissions,
// policies) or must be equivalent (exchanges, queues, as a redeclaration
// must); nothing absent from d is removed. It goes on past an item it
// cannot take, reporting it: a password hash of another algorithm than
// SHA-256, a stream, an inequivalent redeclaration, a parameter Warren
// has no use for.
func (b *Broker) ImportDefinitions(d *Definitions) ImportReport {
	r := ImportReport{Imported: map[string]int{}}
	for _, u := range d.Users {
		if u.HashingAlgorithm != "" && u.HashingAlgorithm != sha256Hashing {
			r.problem("user %s: password hashing %s is not supported (only %s): set a password with 'warrenctl change password'", u.Name, u.HashingAlgorithm, sha256Hashing)
			continue
		}
		if u.Name == "" {
			r.problem("a user without a name")
			continue
		}
		limits, err := readLimits(u.Limits, ParseUserLimits)
		if err != nil {
			r.problem("limits of user %s: %v", u.Name, err)
		}
		if len(limits) == 0 {
			limits = nil
		}
		if err := b.commit(catalog.Put(catalog.User{Name: u.Name, PasswordHash: u.PasswordHash, Tags: []string(u.Tags), Limits: limits})); err != nil {
			r.problem("user %s: %v", u.Name, err)
			continue
		}
		r.Imported["users"]++
	}
	for _, v := range d.Vhosts {
		if b.vhost(v.Name) != nil {
			r.Imported["vhosts"]++ // there already: nothing to change but its limits
			b.importVhostLimits(&r, v)
			continue
		}
		qt := v.queueType()
		if qt != "" && qt != QueueTypeQuorum && qt != QueueTypeClassic {
			r.problem("vhost %s: default queue type %s is not supported; it gets %s", v.Name, qt, b.cfg.DefaultQueueType)
			qt = ""
		}
		if err := b.AddVhost(v.Name, qt); err != nil {
			r.problem("vhost %s: %v", v.Name, err)
			continue
		}
		r.Imported["vhosts"]++
		b.importVhostLimits(&r, v)
	}
	for _, p := range d.Permissions {
		if err := b.SetPermissions(catalog.Permission(p)); err != nil {
			r.problem("permissions of user %s in vhost %s: %v", p.User, p.Vhost, err)
			continue
		}
		r.Imported["permissions"]++
	}
	if n := len(d.TopicPermissions); n > 0 {
		r.problem("%d topic permission(s) not imported: Warren has none", n)
	}
	if n := len(d.GlobalParameters); n > 0 {
		r.problem("%d global parameter(s) not imported", n)
	}
	for _, p := range d.Policies {
		b.importPolicy(&r, "policies", p, false)
	}
	for _, p := range d.Parameters {
		if p.Component == "vhost-limits" {
			b.importVhostLimits(&r, DefVhost{Name: p.Vhost, Limits: p.Value})
			continue
		}
		if p.Component != "operator_policy" {
			r.problem("parameter %s of component %s in vhost %s not imported: Warren has no %s", p.Name, p.Component, p.Vhost, p.Component)
			continue
		}
		var op DefPolicy
		if err := json.Unmarshal(p.Value, &op); err != nil {
			r.problem("operator policy %s in vhost %s: %v", p.Name, p.Vhost, err)
			continue
		}
		op.Vhost, op.Name = p.Vhost, p.Name
		b.importPolicy(&r, "operator policies", op, true)
	}
	for _, x := range d.Exchanges {
		if x.Name == "" || strings.HasPrefix(x.Name, "amq.") {
			continue // predeclared in every vhost
		}
		v, args, ok := b.importTarget(&r, "exchange", x.Name, x.Vhost, x.Arguments)
		if !ok {
			continue
		}
		err := v.DeclareExchange(nil, ExchangeDeclare{Name: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Arguments: args})
		if err != nil {
			r.problem("exchange %s in vhost %s: %v", x.Name, x.Vhost, err)
			continue
		}
		r.Imported["exchanges"]++
	}
	for _, q := range d.Queues {
		v, args, ok := b.importTarget(&r, "queue", q.Name, q.Vhost, q.Arguments)
		if !ok {
			continue
		}
		if _, ok := args["x-queue-type"]; !ok && q.Type != "" {
			if args == nil {
				args = wire.Table{}
			}
			args["x-queue-type"] = q.Type
		}
		if _, _, err := v.DeclareQueue(nil, 0, QueueDeclare{Name: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: args}); err != nil {
			r.problem("queue %s in vhost %s: %v", q.Name, q.Vhost, err)
			continue
		}
		r.Imported["queues"]++
	}
	for _, bd := range d.Bindings {
		v, args, ok := b.importTarget(&r, "binding", bd.Source+" -> "+bd.Destination, bd.Vhost, bd.Arguments)
		if !ok {
			continue
		}
		var err error
		switch bd.DestinationType {
		case "queue":
			err = v.BindQueue(nil, 0, QueueBinding{Queue: bd.Destination, Exchange: bd.Source, RoutingKey: bd.RoutingKey, Arguments: args})
		case "exchange":
			err = v.BindExchange(nil, ExchangeBinding{Destination: bd.Destination, Source: bd.Source, RoutingKey: bd.RoutingKey, Arguments: args})
		default:
			err = fmt.Errorf("destination type %q: queue or exchange", bd.DestinationType)
		}
		if err != nil {
			r.problem("binding of %s %s to exchange %s in vhost %s: %v", bd.DestinationType, bd.Destination, bd.Source, bd.Vhost, err)
			continue
		}
		r.Imported["bindings"]++
	}
	b.log.Info("definitions imported", "imported", r.Imported, "problems", len(r.Problems))
	return r
}

func (b *Broker) importPolicy(r *ImportReport, kind string, p DefPolicy, operator bool) {
	def, err := definitionOfDocument(p.Definition)
	if err == nil {
		err = b.SetPolicy(PolicyDef{Vhost: p.Vhost, Name: p.Name, Operator: operator, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: p.Priority, Definition: def})
	}
	if err != nil {
		r.problem("%s %s in vhost %s: %v", strings.TrimSuffix(kind, "ies")+"y", p.Name, p.Vhost, err)
		return
	}
	r.Imported[kind]++
}

// definitionOfDocument reads a policy's definition: a JSON object, or
// (RabbitMQ 3.10's operator policies) a list of [key, value] pairs.
func definitionOfDocument(raw json.RawMessage) (wire.Table, error) {
	var pairs [][]json.RawMessage
	if json.Unmarshal(raw, &pairs) != nil {
		return DefinitionFromJSON(string(raw))
	}
	obj := make(map[string]json.RawMessage, len(pairs))
	for _, kv := range pairs {
		var k string
		if len(kv) != 2 || json.Unmarshal(kv[0], &k) != nil {
			return nil, fmt.Errorf("definition: a list of [key, value] pairs expected, got %s", raw)
		}
		obj[k] = kv[1]
	}
	asObject, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return DefinitionFromJSON(string(asObject))
}

// importVhostLimits sets the limits a document gives vhost v, if any.
func (b *Broker) importVhostLimits(r *ImportReport, v DefVhost) {
	limits, err := v.limits()
	if err == nil && len(limits) > 0 {
		err = b.SetVhostLimits(v.Name, limits)
	}
	if err != nil {
		r.problem("limits of vhost %s: %v", v.Name, err)
	}
}

// nonNilLimits is limits, or an empty map.
func nonNilLimits(limits map[string]int64) map[string]int64 {
	if limits == nil {
		return map[string]int64{}
	}
	return limits
}

// importTarget finds the vhost of an imported item and reads its
// arguments as a policy definition is read (integers int64).
func (b *Broker) importTarget(r *ImportReport, kind, name, vhost string, raw json.RawMessage) (*Vhost, wire.Table, bool) {
	v := b.vhost(vhost)
	if v == nil {
		r.problem("%s %s: no_such_vhost: %s", kind, name, vhost)
		return nil, nil, false
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return v, nil, true
	}
	args, err := DefinitionFromJSON(string(raw))
	if err != nil {
		r.problem("%s %s in vhost %s: arguments: %v", kind, name, vhost, err)
		return nil, nil, false
	}
	return v, args, true
}

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
