package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// ImportDefinitions adds what d defines, as rabbitmqctl
// import_definitions does: what exists is updated (users, permissions,
// policies) or must be equivalent (exchanges, queues, as a redeclaration
// must); nothing absent from d is removed. It goes on past an item it
// cannot take, reporting it: a password hash of another algorithm than
// SHA-256, a stream, an inequivalent redeclaration, a parameter Warren
// has no use for.
func (b *Broker) ImportDefinitions(d *Definitions) ImportReport {
	im := &importer{b: b, r: ImportReport{Imported: map[string]int{}}}
	im.users(d.Users)
	im.vhosts(d.Vhosts)
	im.permissions(d.Permissions)
	if n := len(d.TopicPermissions); n > 0 {
		im.r.problem("%d topic permission(s) not imported: Warren has none", n)
	}
	if n := len(d.GlobalParameters); n > 0 {
		im.r.problem("%d global parameter(s) not imported", n)
	}
	for _, p := range d.Policies {
		im.policy("policies", p, false)
	}
	im.parameters(d.Parameters)
	im.exchanges(d.Exchanges)
	im.queues(d.Queues)
	im.bindings(d.Bindings)
	b.log.Info("definitions imported", "imported", im.r.Imported, "problems", len(im.r.Problems))
	return im.r
}

// importer is one run of ImportDefinitions: the broker it imports into,
// and the report it fills in as it goes, in the document's order.
type importer struct {
	b *Broker
	r ImportReport
}

// users imports users; only SHA-256 password hashes can be checked.
func (im *importer) users(users []DefUser) {
	for _, u := range users {
		if u.HashingAlgorithm != "" && u.HashingAlgorithm != sha256Hashing {
			im.r.problem("user %s: password hashing %s is not supported (only %s): set a password with 'warrenctl change password'", u.Name, u.HashingAlgorithm, sha256Hashing)
			continue
		}
		if u.Name == "" {
			im.r.problem("a user without a name")
			continue
		}
		limits, err := readLimits(u.Limits, ParseUserLimits)
		if err != nil {
			im.r.problem("limits of user %s: %v", u.Name, err)
		}
		if len(limits) == 0 {
			limits = nil
		}
		if err := im.b.commit(catalog.Put(catalog.User{Name: u.Name, PasswordHash: u.PasswordHash, Tags: []string(u.Tags), Limits: limits})); err != nil {
			im.r.problem("user %s: %v", u.Name, err)
			continue
		}
		im.r.Imported["users"]++
	}
}

// vhosts imports vhosts, and the limits the document gives them.
func (im *importer) vhosts(vhosts []DefVhost) {
	for _, v := range vhosts {
		if im.b.vhost(v.Name) != nil {
			im.r.Imported["vhosts"]++ // there already: nothing to change but its limits
			im.vhostLimits(v)
			continue
		}
		qt := v.queueType()
		if qt != "" && qt != QueueTypeQuorum && qt != QueueTypeClassic {
			im.r.problem("vhost %s: default queue type %s is not supported; it gets %s", v.Name, qt, im.b.cfg.DefaultQueueType)
			qt = ""
		}
		if err := im.b.AddVhost(v.Name, qt); err != nil {
			im.r.problem("vhost %s: %v", v.Name, err)
			continue
		}
		im.r.Imported["vhosts"]++
		im.vhostLimits(v)
	}
}

// permissions imports users' permissions on vhosts.
func (im *importer) permissions(perms []DefPermission) {
	for _, p := range perms {
		if err := im.b.SetPermissions(catalog.Permission(p)); err != nil {
			im.r.problem("permissions of user %s in vhost %s: %v", p.User, p.Vhost, err)
			continue
		}
		im.r.Imported["permissions"]++
	}
}

// parameters imports the runtime parameters Warren has a use for, vhost
// limits and operator policies, and reports the others.
func (im *importer) parameters(params []DefParameter) {
	for _, p := range params {
		if p.Component == "vhost-limits" {
			im.vhostLimits(DefVhost{Name: p.Vhost, Limits: p.Value})
			continue
		}
		if p.Component != "operator_policy" {
			im.r.problem("parameter %s of component %s in vhost %s not imported: Warren has no %s", p.Name, p.Component, p.Vhost, p.Component)
			continue
		}
		var op DefPolicy
		if err := json.Unmarshal(p.Value, &op); err != nil {
			im.r.problem("operator policy %s in vhost %s: %v", p.Name, p.Vhost, err)
			continue
		}
		op.Vhost, op.Name = p.Vhost, p.Name
		im.policy("operator policies", op, true)
	}
}

// exchanges declares exchanges; the predeclared ones exist already.
func (im *importer) exchanges(exchanges []DefExchange) {
	for _, x := range exchanges {
		if x.Name == "" || strings.HasPrefix(x.Name, "amq.") {
			continue // predeclared in every vhost
		}
		v, args, ok := im.target("exchange", x.Name, x.Vhost, x.Arguments)
		if !ok {
			continue
		}
		err := v.DeclareExchange(nil, ExchangeDeclare{Name: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Arguments: args})
		if err != nil {
			im.r.problem("exchange %s in vhost %s: %v", x.Name, x.Vhost, err)
			continue
		}
		im.r.Imported["exchanges"]++
	}
}

// queues declares queues, as a redeclaration would.
func (im *importer) queues(queues []DefQueue) {
	for _, q := range queues {
		v, args, ok := im.target("queue", q.Name, q.Vhost, q.Arguments)
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
			im.r.problem("queue %s in vhost %s: %v", q.Name, q.Vhost, err)
			continue
		}
		im.r.Imported["queues"]++
	}
}

// bindings binds queues and exchanges to exchanges.
func (im *importer) bindings(bindings []DefBinding) {
	for _, bd := range bindings {
		v, args, ok := im.target("binding", bd.Source+" -> "+bd.Destination, bd.Vhost, bd.Arguments)
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
			im.r.problem("binding of %s %s to exchange %s in vhost %s: %v", bd.DestinationType, bd.Destination, bd.Source, bd.Vhost, err)
			continue
		}
		im.r.Imported["bindings"]++
	}
}

// policy sets a policy, or an operator policy; kind names the report's
// count.
func (im *importer) policy(kind string, p DefPolicy, operator bool) {
	def, err := definitionOfDocument(p.Definition)
	if err == nil {
		err = im.b.SetPolicy(PolicyDef{Vhost: p.Vhost, Name: p.Name, Operator: operator, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: p.Priority, Definition: def})
	}
	if err != nil {
		im.r.problem("%s %s in vhost %s: %v", strings.TrimSuffix(kind, "ies")+"y", p.Name, p.Vhost, err)
		return
	}
	im.r.Imported[kind]++
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

// vhostLimits sets the limits a document gives vhost v, if any.
func (im *importer) vhostLimits(v DefVhost) {
	limits, err := v.limits()
	if err == nil && len(limits) > 0 {
		err = im.b.SetVhostLimits(v.Name, limits)
	}
	if err != nil {
		im.r.problem("limits of vhost %s: %v", v.Name, err)
	}
}

// target finds the vhost of an imported item and reads its
// arguments as a policy definition is read (integers int64).
func (im *importer) target(kind, name, vhost string, raw json.RawMessage) (*Vhost, wire.Table, bool) {
	v := im.b.vhost(vhost)
	if v == nil {
		im.r.problem("%s %s: no_such_vhost: %s", kind, name, vhost)
		return nil, nil, false
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return v, nil, true
	}
	args, err := DefinitionFromJSON(string(raw))
	if err != nil {
		im.r.problem("%s %s in vhost %s: arguments: %v", kind, name, vhost, err)
		return nil, nil, false
	}
	return v, args, true
}
