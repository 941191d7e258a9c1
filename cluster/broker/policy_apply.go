package broker

import (
	"errors"
	"fmt"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/forward"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/classic"
)

// This file carries policies to queues and exchanges. A vhost keeps its
// policies and operator policies; every queue keeps its effective
// arguments (declared x-arguments with the policies applied, policy.go),
// from which its engine is built, and every exchange its effective
// alternate exchange. A policy set or cleared — here, or on another node
// and replicated — recomputes them under the vhost's lock; queues whose
// effective arguments changed are then reconfigured.
//
// Reconfiguring a replicated queue is a command in its Raft log, so one
// node per queue proposes it: the node whose replica leads the queue,
// checked when the policy change is applied and again every
// reconcileInterval. Each node counts, per queue, the version of the
// effective arguments it computed (effVer) and the last version it
// handed to the queue (pushedVer); a node that becomes leader later
// finds them different and hands the queue its current arguments. Handing
// the same arguments twice is harmless: the command sets the whole
// configuration. A queue restored or declared with a policy applying
// starts with pushedVer behind, so its leader sends the effective
// arguments through the log once and every replica ends up with them.
// vhostPolicies are a vhost's policies and operator policies by name,
// and carrying them to its queues and exchanges. Guarded by the vhost's
// lock (v.mu): a change recomputes every queue's and exchange's
// arguments at once.
type vhostPolicies struct {
	v          *Vhost
	policies   map[string]*policy
	opPolicies map[string]*policy
}

// reconfigurer is a queue engine whose running configuration can change:
// it takes the queue's whole effective x-arguments.
type reconfigurer interface{ Reconfigure(args wire.Table) error }

// putPolicy commits rec, then makes p, its compiled form, one of the
// vhost's policies and recomputes what the policies give every queue and
// exchange. It returns the queues whose arguments changed, for
// pushConfigs.
func (vp *vhostPolicies) putPolicy(rec catalog.Policy, p *policy) ([]*Queue, error) {
	vp.v.mu.Lock()
	defer vp.v.mu.Unlock()
	if err := vp.v.persist(catalog.Put(rec)); err != nil {
		return nil, err
	}
	vp.policySet(rec.Operator)[rec.Name] = p
	return vp.refreshPoliciesLocked(), nil
}

// deletePolicy commits the deletion of the policy (or operator policy)
// name, then removes it as putPolicy adds one; ErrNoPolicy if there is
// none.
func (vp *vhostPolicies) deletePolicy(name string, operator bool) ([]*Queue, error) {
	vp.v.mu.Lock()
	defer vp.v.mu.Unlock()
	set := vp.policySet(operator)
	p, ok := set[name]
	if !ok {
		return nil, ErrNoPolicy
	}
	if err := vp.v.persist(catalog.Del(p.rec)); err != nil {
		return nil, err
	}
	delete(set, name)
	return vp.refreshPoliciesLocked(), nil
}

// policyViews are the vhost's policies (or operator policies) as
// operators list them, in no order.
func (vp *vhostPolicies) policyViews(operator bool) []PolicyDef {
	vp.v.mu.RLock()
	defer vp.v.mu.RUnlock()
	var out []PolicyDef
	for _, p := range vp.policySet(operator) {
		out = append(out, p.view())
	}
	return out
}

// queuePolicies names the policy and operator policy that apply to queue
// name ("" for none), and gives its effective arguments.
func (vp *vhostPolicies) queuePolicies(name string) (policy, operatorPolicy string, effective wire.Table, ok bool) {
	vp.v.mu.RLock()
	defer vp.v.mu.RUnlock()
	q, ok := vp.v.queues[name]
	if !ok {
		return "", "", nil, false
	}
	return q.policy, q.opPolicy, q.eff, true
}

// queuePolicyValue is the value of key that the policies applying to a
// queue named name of type typ give it, merged (policyValue).
func (vp *vhostPolicies) queuePolicyValue(name, typ, key string) (any, bool) {
	vp.v.mu.RLock()
	defer vp.v.mu.RUnlock()
	pol, op := vp.queuePoliciesLocked(name, typ)
	return policyValue(key, pol, op)
}

// unpushed are the queues whose current arguments this node has not
// handed over, and is not handing over now (the reconcile loop's).
func (vp *vhostPolicies) unpushed() []*Queue {
	vp.v.mu.RLock()
	defer vp.v.mu.RUnlock()
	var stale []*Queue
	for _, q := range vp.v.queues {
		if q.pushedVer != q.effVer && !q.pushing {
			stale = append(stale, q)
		}
	}
	return stale
}

func (vp *vhostPolicies) policySet(operator bool) map[string]*policy {
	if operator {
		return vp.opPolicies
	}
	return vp.policies
}

func (p *policy) view() PolicyDef {
	return PolicyDef{
		Vhost: p.rec.Vhost, Name: p.rec.Name, Operator: p.rec.Operator,
		Pattern: p.rec.Pattern, ApplyTo: p.rec.ApplyTo, Priority: p.rec.Priority,
		Definition: p.def,
	}
}

// applyPolicy applies a policy change another node committed (or a
// restore). Idempotent.
func (vp *vhostPolicies) applyPolicy(rec catalog.Policy, del bool) {
	var p *policy
	if !del {
		var err error
		if p, err = compilePolicy(rec); err != nil {
			vp.v.b.log.Warn("ignoring replicated policy", "vhost", vp.v.name, "policy", rec.Name, "err", err)
			return
		}
	}
	vp.v.mu.Lock()
	set := vp.policySet(rec.Operator)
	old, had := set[rec.Name]
	switch {
	case del && !had:
		vp.v.mu.Unlock()
		return
	case del:
		delete(set, rec.Name)
	case had && samePolicy(old.rec, rec):
		vp.v.mu.Unlock()
		return
	default:
		set[rec.Name] = p
	}
	changed := vp.refreshPoliciesLocked()
	vp.v.mu.Unlock()
	vp.pushConfigs(changed)
}

func samePolicy(a, b catalog.Policy) bool {
	return a.Pattern == b.Pattern && a.ApplyTo == b.ApplyTo && a.Priority == b.Priority && string(a.Definition) == string(b.Definition)
}

// queuePoliciesLocked returns the policy and operator policy that apply to
// a queue. v.mu is held.
func (vp *vhostPolicies) queuePoliciesLocked(name, typ string) (pol, op *policy) {
	m := func(p *policy) bool { return p.matchesQueue(name, typ) }
	return pick(vp.policies, m), pick(vp.opPolicies, m)
}

// effectiveArgsLocked is what a queue named name of type typ declared
// with args runs with. v.mu is held.
func (vp *vhostPolicies) effectiveArgsLocked(name, typ string, args wire.Table) wire.Table {
	pol, op := vp.queuePoliciesLocked(name, typ)
	return effectiveArgs(typ, args, pol, op)
}

// setPolicyState records which policies apply to q and its effective
// arguments; it reports whether those changed. v.mu is held (or q is not
// registered yet).
func (q *Queue) setPolicyState(pol, op *policy, eff wire.Table) bool {
	name := func(p *policy) string {
		if p == nil {
			return ""
		}
		return p.rec.Name
	}
	q.policy, q.opPolicy = name(pol), name(op)
	if q.eff != nil && tablesEqual(q.eff, eff) {
		return false
	}
	q.eff = eff
	q.dlx.Store(deadLetterTargetOf(eff))
	q.effVer++
	return true
}

// refreshPoliciesLocked recomputes every queue's effective arguments and
// every exchange's alternate exchange after a policy change, and returns
// the queues whose arguments changed. v.mu is held.
func (vp *vhostPolicies) refreshPoliciesLocked() []*Queue {
	var changed []*Queue
	for _, q := range vp.v.queues {
		pol, op := vp.queuePoliciesLocked(q.rec.Name, q.rec.Type)
		if q.setPolicyState(pol, op, vp.runnableArgs(q, effectiveArgs(q.rec.Type, q.args, pol, op))) {
			changed = append(changed, q)
		}
	}
	for _, x := range vp.v.exchanges {
		vp.applyExchangePolicyLocked(x)
	}
	return changed
}

// runnableArgs is eff when the queue's rules accept it, else the queue's
// declared arguments: policies are validated key by key, and a
// combination the queue refuses leaves it as declared (logged).
func (vp *vhostPolicies) runnableArgs(q *Queue, eff wire.Table) wire.Table {
	var err error
	if q.rec.Type == QueueTypeQuorum {
		_, err = raftq.ParseConfig(map[string]any(eff))
	} else {
		_, _, err = classic.ParseConfig(eff)
	}
	if err != nil {
		vp.v.b.log.Warn("queue refuses the arguments its policies give; it keeps its own", "vhost", vp.v.name, "queue", q.rec.Name, "err", err)
		return q.args
	}
	return eff
}

// applyExchangePolicyLocked sets x's effective alternate exchange: its
// alternate-exchange argument if it has one, else the policy's
// (rabbit_exchange via rabbit_policy:get_arg/3). v.mu is held.
func (vp *vhostPolicies) applyExchangePolicyLocked(x *exchange) {
	if arg, ok := x.args["alternate-exchange"]; ok {
		x.alternate, _ = arg.(string)
		return
	}
	m := func(p *policy) bool { return p.matchesExchange(x.rec.Name) }
	ae, _ := policyValue("alternate-exchange", pick(vp.policies, m), pick(vp.opPolicies, m))
	x.alternate, _ = ae.(string)
}

// deadLetterTargetOf reads the dead-letter target of effective arguments;
// nil when they name no dead-letter exchange.
func deadLetterTargetOf(args wire.Table) *deadLetterTarget {
	ex, ok := args["x-dead-letter-exchange"].(string)
	if !ok {
		return nil
	}
	t := &deadLetterTarget{exchange: ex}
	t.routingKey, t.hasRoutingKey = args["x-dead-letter-routing-key"].(string)
	return t
}

func tablesEqual(a, b wire.Table) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || !argEqual(x, y) {
			return false
		}
	}
	return true
}

// leadsHere reports whether node should reconfigure engine: a
// replicated queue's router says which node leads; an in-memory queue
// lives here.
func leadsHere(engine any, node string) bool {
	if l, ok := engine.(interface{ Leader() string }); ok {
		return l.Leader() == node
	}
	return true
}

func (vp *vhostPolicies) pushConfigs(qs []*Queue) {
	for _, q := range qs {
		vp.pushConfig(q)
	}
}

// pushConfig hands q's effective arguments to its engine when this node
// leads the queue and has not handed over the current version yet. At
// most one hand-over per queue runs at a time; a newer version that
// arrives meanwhile follows it.
//
// Not from a model still replaying the metadata after a start: a node
// that restarts holds the policies of its last snapshot and replays those
// set and cleared since, and a queue it leads meanwhile (or at once, as
// the only member with the longest log) would run with each in turn; a
// max-length long replaced would drop messages for good. The reconcile
// loop hands the arguments over once the node has caught up.
func (vp *vhostPolicies) pushConfig(q *Queue) {
	if q.engine == nil || !leadsHere(q.engine, vp.v.b.cfg.NodeID) || vp.v.b.fresh.replaying() {
		return
	}
	vp.v.mu.Lock()
	if q.pushing || q.pushedVer == q.effVer || vp.v.queues[q.rec.Name] != q {
		vp.v.mu.Unlock()
		return
	}
	q.pushing = true
	ver, eff := q.effVer, q.eff
	vp.v.mu.Unlock()
	go func() {
		err := reconfigure(q.engine, eff)
		vp.v.mu.Lock()
		q.pushing = false
		switch {
		case err == nil:
			q.pushedVer = ver
		case errors.As(err, new(*raftq.ArgError)):
			// Refused for good (runnableArgs should have caught it).
			q.pushedVer = ver
			vp.v.b.log.Warn("queue refused its new arguments", "vhost", vp.v.name, "queue", q.rec.Name, "err", err)
		case errors.Is(err, forward.ErrReconfigureUnsupported):
			// This build's queues cannot change configuration while
			// running: the arguments apply from the next start.
			q.pushedVer = ver
			vp.v.b.log.Debug("queue cannot be reconfigured while running", "vhost", vp.v.name, "queue", q.rec.Name)
		default:
			vp.v.b.log.Warn("reconfigure queue after a policy change; will retry", "vhost", vp.v.name, "queue", q.rec.Name, "err", err)
		}
		again := err == nil && q.pushedVer != q.effVer
		vp.v.mu.Unlock()
		if again {
			vp.pushConfig(q)
		}
	}()
}

func reconfigure(engine any, args wire.Table) error {
	r, ok := engine.(reconfigurer)
	if !ok {
		return fmt.Errorf("%w (%T)", forward.ErrReconfigureUnsupported, engine)
	}
	if args == nil {
		args = wire.Table{}
	}
	return r.Reconfigure(args)
}
