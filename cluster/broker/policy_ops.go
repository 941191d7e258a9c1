package broker

import (
	"slices"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// policyOps are policies as an operator sets, clears and lists them
// (rabbitmqctl set_policy, clear_policy, list_policies and their operator
// policy forms), and the loop that hands a queue the arguments its
// policies give once this node leads it. The policies themselves live in
// each vhost (vhostPolicies, policy_apply.go), under the vhost's lock.
type policyOps struct {
	// b is the core: its vhosts hold the policies, and its lifetime
	// ends the reconcile loop.
	b *Broker
	// reconciled is closed once the reconcile loop has returned.
	reconciled chan struct{}
}

func (o *policyOps) init(b *Broker) {
	o.b = b
	o.reconciled = make(chan struct{})
}

// SetPolicy creates or replaces a policy (or operator policy), after
// validating it as RabbitMQ does. It returns once the change is committed
// and applied to this node's model; queues are reconfigured after that,
// asynchronously, as in RabbitMQ.
func (o *policyOps) SetPolicy(d PolicyDef) error {
	if d.ApplyTo == "" {
		d.ApplyTo = ApplyToAll
	}
	if err := validatePolicy(&d, o.b.cfg.DenyQueueMasterLocator); err != nil {
		return err
	}
	v := o.b.vhost(d.Vhost)
	if v == nil {
		return policyErrorf("no_such_vhost: %s", d.Vhost)
	}
	rec, err := policyRecord(d)
	if err != nil {
		return err
	}
	p, err := compilePolicy(rec)
	if err != nil {
		return err
	}
	changed, err := v.putPolicy(rec, p)
	if err != nil {
		return err
	}
	o.b.log.Info("policy set", "vhost", d.Vhost, "name", d.Name, "operator", d.Operator, "pattern", d.Pattern, "apply_to", d.ApplyTo, "priority", d.Priority)
	v.pushConfigs(changed)
	return nil
}

// ClearPolicy deletes a policy (or operator policy); ErrNoPolicy if there
// is none of that name.
func (o *policyOps) ClearPolicy(vhost, name string, operator bool) error {
	v := o.b.vhost(vhost)
	if v == nil {
		return policyErrorf("no_such_vhost: %s", vhost)
	}
	changed, err := v.deletePolicy(name, operator)
	if err != nil {
		return err
	}
	o.b.log.Info("policy cleared", "vhost", vhost, "name", name, "operator", operator)
	v.pushConfigs(changed)
	return nil
}

// Policies lists the policies (or operator policies) of vhost ("" for
// every vhost): by vhost, then by priority from lowest to highest as
// rabbitmqctl list_policies does (rabbit_policy:sort_by_priority/1), then
// by name.
func (o *policyOps) Policies(vhost string, operator bool) []PolicyDef {
	var out []PolicyDef
	for _, v := range o.b.selectVhosts(vhost) {
		out = append(out, v.policyViews(operator)...)
	}
	slices.SortFunc(out, func(a, b PolicyDef) int {
		if c := strings.Compare(a.Vhost, b.Vhost); c != 0 {
			return c
		}
		if a.Priority != b.Priority {
			return a.Priority - b.Priority
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// QueuePolicies names the policy and operator policy that apply to a
// queue ("" for none) and its effective arguments.
func (o *policyOps) QueuePolicies(vhost, name string) (policy, operatorPolicy string, effective wire.Table, ok bool) {
	v := o.b.vhost(vhost)
	if v == nil {
		return "", "", nil, false
	}
	return v.queuePolicies(name)
}

// TargetGroupSize is the size quorum queue rec is to be grown to by
// membership reconciliation, as rabbit_quorum_queue_periodic_membership_
// reconciliation:get_target_size/1 computes it: the larger of its
// x-quorum-target-group-size argument and the target-group-size of the
// policies that apply (policy and operator policy merged: the larger).
// 0 means no target: the queue is not reconciled (RabbitMQ does not fall
// back to x-quorum-initial-group-size).
func (o *policyOps) TargetGroupSize(rec catalog.Queue) int {
	args, _ := decodeTable(rec.Arguments)
	n, _ := asInt(args["x-quorum-target-group-size"])
	if v := o.b.vhost(rec.Vhost); v != nil {
		if pv, ok := v.queuePolicyValue(rec.Name, rec.Type, "target-group-size"); ok {
			if p, ok := asInt(pv); ok {
				n = max(n, p)
			}
		}
	}
	return int(max(n, 0))
}

// reconcile runs until the broker closes: every reconcileInterval it
// hands queues this node leads the configuration it has not handed them
// yet (leadership moved here since a policy changed, or a hand-over
// failed).
func (o *policyOps) reconcile() {
	defer close(o.reconciled)
	t := time.NewTicker(reconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-o.b.ctx.Done():
			return
		case <-t.C:
		}
		vhosts := o.b.selectVhosts("")
		for _, v := range vhosts {
			v.pushConfigs(v.unpushed())
		}
	}
}

// stopReconcile ends the reconcile loop and waits for it to return.
func (o *policyOps) stopReconcile() {
	o.b.stop()
	<-o.reconciled
}

// reconcileInterval is how often a node looks for queues it leads whose
// configuration it has not handed over yet.
const reconcileInterval = 2 * time.Second
