package node

import (
	"errors"
	"fmt"

	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/broker"
)

// policyAdmin answers for policies: the broker's.
type policyAdmin struct{ b *broker.Broker }

func (a policyAdmin) SetPolicy(p admin.PolicyInfo) error {
	def, err := broker.DefinitionFromJSON(p.Definition)
	if err == nil {
		err = a.b.SetPolicy(broker.PolicyDef{
			Vhost: p.Vhost, Name: p.Name, Operator: p.Operator, Pattern: p.Pattern,
			ApplyTo: p.ApplyTo, Priority: p.Priority, Definition: def,
		})
	}
	return policyError(err)
}

func (a policyAdmin) ClearPolicy(vhost, name string, operator bool) error {
	return policyError(a.b.ClearPolicy(vhost, name, operator))
}

func (a policyAdmin) Policies(vhost string, operator bool) []admin.PolicyInfo {
	var out []admin.PolicyInfo
	for _, p := range a.b.Policies(vhost, operator) {
		out = append(out, admin.PolicyInfo{
			Vhost: p.Vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
			Definition: broker.DefinitionJSON(p.Definition), Priority: p.Priority, Operator: p.Operator,
		})
	}
	return out
}

// policyError turns the broker's refusals into the admin service's.
func policyError(err error) error {
	var pe *broker.PolicyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return admin.Invalid(pe.Msg)
	case errors.Is(err, broker.ErrNoPolicy):
		return fmt.Errorf("%w: %v", admin.ErrNotFound, err)
	}
	return err
}
