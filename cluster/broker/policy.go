package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
)

// This file holds policies and operator policies as RabbitMQ 4.3 has them
// (rabbit_policy.erl, rabbit_policies.erl): what a definition may say, which
// policy applies to a queue or exchange, and how its values combine with
// the operator policy's and with the x-arguments the queue was declared
// with. policy_apply.go carries a change of policies to the running queues.

// Apply-to values of a policy (rabbit_policy:apply_to_validation/2 and the
// queue types' policy_apply_to_name/0).
const (
	ApplyToAll           = "all"
	ApplyToQueues        = "queues"
	ApplyToExchanges     = "exchanges"
	ApplyToClassicQueues = "classic_queues"
	ApplyToQuorumQueues  = "quorum_queues"
	ApplyToStreams       = "streams"
)

// PolicyDef is a policy (or, Operator, an operator policy) as operators
// set and list it.
type PolicyDef struct {
	Vhost, Name string
	Operator    bool
	Pattern     string
	ApplyTo     string
	Priority    int
	// Definition holds the policy's keys; JSON numbers without a
	// fraction are int64 (DefinitionFromJSON).
	Definition wire.Table
}

// PolicyError is a refused policy, with RabbitMQ's text.
type PolicyError struct{ Msg string }

func (e *PolicyError) Error() string { return e.Msg }

func policyErrorf(format string, args ...any) error {
	return &PolicyError{Msg: fmt.Sprintf(format, args...)}
}

// ErrNoPolicy is ClearPolicy's error for a policy that does not exist.
var ErrNoPolicy = errors.New("Parameter does not exist")

// policy is a stored policy, compiled.
type policy struct {
	rec catalog.Policy
	re  *regexp.Regexp
	def wire.Table
}

func compilePolicy(rec catalog.Policy) (*policy, error) {
	re, err := regexp.Compile(rec.Pattern)
	if err != nil {
		return nil, policyErrorf("pattern %s should be regular expression but is invalid: %v", erlTerm(rec.Pattern), err)
	}
	def, err := decodeTable(rec.Definition)
	if err != nil {
		return nil, fmt.Errorf("decode policy definition: %w", err)
	}
	return &policy{rec: rec, re: re, def: def}, nil
}

// DefinitionFromJSON reads a policy definition as rabbitmqctl takes it:
// a JSON object. Integers become int64, other numbers float64, nested
// objects tables.
func DefinitionFromJSON(s string) (wire.Table, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, policyErrorf("Could not parse JSON document: %v", err)
	}
	if d.More() {
		return nil, policyErrorf("Could not parse JSON document: trailing data")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, policyErrorf("definition must be a dictionary: %s", erlTerm(fromJSON(v)))
	}
	return fromJSON(m).(wire.Table), nil
}

func fromJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		t := make(wire.Table, len(x))
		for k, e := range x {
			t[k] = fromJSON(e)
		}
		return t
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromJSON(e)
		}
		return out
	}
	return v
}

// DefinitionJSON renders a definition as JSON, keys sorted.
func DefinitionJSON(t wire.Table) string {
	if t == nil {
		t = wire.Table{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any(t)); err != nil {
		return "{}"
	}
	return strings.TrimSpace(buf.String())
}

// erlTerm renders v as Erlang's ~tp would print the term RabbitMQ decoded
// from JSON: strings as binaries, for the texts of validation errors.
func erlTerm(v any) string {
	switch x := v.(type) {
	case string:
		return `<<"` + x + `">>`
	case nil:
		return "null"
	case bool:
		return fmt.Sprint(x)
	case float64:
		return fmt.Sprint(x)
	case wire.Table:
		keys := sortedKeys(x)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = erlTerm(k) + " => " + erlTerm(x[k])
		}
		return "#{" + strings.Join(parts, ",") + "}"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = erlTerm(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	if n, ok := asInt(v); ok {
		return fmt.Sprint(n)
	}
	return fmt.Sprint(v)
}

func sortedKeys(t wire.Table) []string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// policyKey validates one key of a definition (rabbit_policies:
// validate_policy0/2); operator says whether operator policies may set it.
type policyKey struct {
	check    func(v any) bool
	text     string // "~tp is not a valid …", with %s for the value
	operator bool
}

func isInt(min int64) func(any) bool {
	return func(v any) bool {
		n, ok := v.(int64)
		return ok && n >= min
	}
}

func anyInt(v any) bool { _, ok := v.(int64); return ok }

func isString(v any) bool { _, ok := v.(string); return ok }

func oneOf(vals ...string) func(any) bool {
	return func(v any) bool {
		s, ok := v.(string)
		return ok && slices.Contains(vals, s)
	}
}

func isVersion(v any) bool { n, ok := v.(int64); return ok && (n == 1 || n == 2) }

// maxAgeRE is what rabbit_amqqueue:check_max_age/1 accepts: a count and a
// unit (years, months, days, hours, minutes, seconds).
var maxAgeRE = regexp.MustCompile(`^[0-9]+(Y|M|D|h|m|s)$`)

func isMaxAge(v any) bool { s, ok := v.(string); return ok && maxAgeRE.MatchString(s) }

// policyKeys are the keys RabbitMQ 4.3's core registers as policy
// validators (rabbit_policies:register/0), with their checks and texts.
// Warren acts on those it implements (see queuePolicyKeys and
// alternate-exchange); the others (stream and classic-queue storage keys)
// are accepted and stored, as RabbitMQ would, and have no effect here.
var policyKeys = map[string]policyKey{
	"alternate-exchange":            {isString, "%s is not a valid alternate exchange name", false},
	"consumer-disconnected-timeout": {isInt(0), "%s is not a valid consumer disconnected timeout", false},
	"consumer-timeout":              {isInt(0), "%s is not a valid consumer timeout", false},
	"dead-letter-exchange":          {isString, "%s is not a valid dead letter exchange name", false},
	"dead-letter-routing-key":       {isString, "%s is not a valid dead letter routing key", false},
	"dead-letter-strategy":          {oneOf("at-most-once", "at-least-once"), "%s is not a valid dead letter strategy", false},
	"message-ttl":                   {isInt(0), "%s is not a valid message TTL", true},
	"expires":                       {isInt(1), "%s is not a valid queue expiry", true},
	"max-length":                    {isInt(0), "%s is not a valid maximum length", true},
	"max-length-bytes":              {isInt(0), "%s is not a valid maximum length in bytes", true},
	"max-in-memory-length":          {isInt(0), "%s is not a valid maximum memory in bytes", true},
	"max-in-memory-bytes":           {isInt(0), "%s is not a valid maximum memory in bytes", true},
	"queue-mode":                    {oneOf("default", "lazy"), "%s is not a valid queue-mode value", false},
	"queue-version":                 {isVersion, "%s is not a valid queue-version value", true},
	"overflow":                      {oneOf("drop-head", "reject-publish", "reject-publish-dlx"), "%s is not a valid overflow value", true},
	"delivery-limit":                {anyInt, "%s is not a valid delivery limit", true},
	"max-age":                       {isMaxAge, "%s is not a valid max age", false},
	"stream-max-segment-size-bytes": {func(v any) bool { n, ok := v.(int64); return ok && n >= 0 && n <= 3_000_000_000 }, "%s is not a valid segment size", false},
	"stream-filter-size-bytes":      {func(v any) bool { n, ok := v.(int64); return ok && n >= 16 && n <= 255 }, "%s is not a valid filter size. Valid range is 16-255", false},
	"queue-leader-locator":          {oneOf("client-local", "balanced", "random", "least-leaders"), "%s is not a valid queue leader locator value", false},
	"initial-cluster-size":          {isInt(0), "%s is not a valid cluster size", false},
	// queue-master-locator, deprecated, is registered by
	// rabbit_classic_queue (policy and operator policy validator); it
	// takes the leader locators' names. 4.3 refuses the key outright
	// unless the deprecated feature is permitted (validatePolicy's deny).
	"queue-master-locator": {oneOf("client-local", "balanced", "random", "least-leaders", "min-masters"), "%s is not a valid master locator", true},
	// target-group-size is registered by rabbit_quorum_queue (policy and
	// operator policy validator): a positive integer. Warren's reconciler
	// grows quorum queues to it (cluster/node/reconcile.go).
	"target-group-size": {isInt(1), "%s is not a valid qq target count value", true},
	// delayed-retry-* are registered by rabbit_quorum_queue in 4.3 (policy
	// and operator policy validators, validate_policy0/2): how long a
	// returned message waits before it is ready again (raftq.DelayedRetry).
	"delayed-retry-type": {oneOf("all", "failed", "returned", "disabled"), "%s is not a valid delayed retry type. Must be one of: all, failed, returned, disabled", true},
	"delayed-retry-min":  {isInt(1), "%s is not a valid delayed retry minimum delay. Must be a positive integer", true},
	"delayed-retry-max":  {isInt(1), "%s is not a valid delayed retry maximum delay. Must be a positive integer", true},
}

// validatePolicy checks a policy as rabbit_policy:validate/5 does: the
// apply-to value, the pattern, then the definition: no keys is an error,
// each known key's value is checked (in key order; the first error is
// the answer), and unknown keys (or, for an operator policy, keys
// operators may not set) are refused together. denyMasterLocator refuses
// the deprecated queue-master-locator key, as RabbitMQ 4.3 does by default.
func validatePolicy(p *PolicyDef, denyMasterLocator bool) error {
	if p.Name == "" {
		return policyErrorf("a policy needs a name")
	}
	switch p.ApplyTo {
	case ApplyToAll, ApplyToQueues, ApplyToExchanges, ApplyToClassicQueues, ApplyToQuorumQueues, ApplyToStreams:
	default:
		return policyErrorf("apply-to '%s' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'", p.ApplyTo)
	}
	if _, err := regexp.Compile(p.Pattern); err != nil {
		return policyErrorf("pattern %s should be regular expression but is invalid: %v", erlTerm(p.Pattern), err)
	}
	if len(p.Definition) == 0 {
		return policyErrorf("no policy provided")
	}
	var unknown []string
	for _, k := range sortedKeys(p.Definition) {
		pk, ok := policyKeys[k]
		if !ok || (p.Operator && !pk.operator) {
			unknown = append(unknown, "{"+erlTerm(k)+","+erlTerm(p.Definition[k])+"}")
			continue
		}
		if k == "queue-master-locator" && denyMasterLocator {
			return policyErrorf("use of deprecated queue-master-locator argument is not permitted")
		}
		if !pk.check(p.Definition[k]) {
			return policyErrorf(pk.text, erlTerm(p.Definition[k]))
		}
	}
	if len(unknown) > 0 {
		return policyErrorf("[%s] are not recognised policy settings", strings.Join(unknown, ","))
	}
	return validateDelayedRetry(p.Definition)
}

// validateDelayedRetry is rabbit_quorum_queue's
// validate_delayed_retry_constraints/1, run once every key is valid: a
// delayed retry type needs a minimum, and the maximum is not below it.
func validateDelayedRetry(def map[string]any) error {
	typ, hasType := def["delayed-retry-type"]
	minV, hasMin := def["delayed-retry-min"]
	if hasType && typ != "disabled" && !hasMin {
		return policyErrorf("delayed-retry-min is required when delayed-retry-type is %s", typ)
	}
	lo, lok := asInt(minV)
	hi, hok := asInt(def["delayed-retry-max"])
	if lok && hok && hi < lo {
		return policyErrorf("delayed-retry-max (%d) must not be smaller than delayed-retry-min (%d)", hi, lo)
	}
	return nil
}

// unsupportedPolicies are the keys that make a policy not apply to a queue
// of the type at all (the queue types' capabilities/0 unsupported_policies,
// checked by rabbit_queue_type:is_policy_applicable/2).
var unsupportedPolicies = map[string][]string{
	QueueTypeQuorum: {"max-priority", "queue-mode", "ha-mode", "ha-params", "ha-sync-mode",
		"ha-promote-on-shutdown", "ha-promote-on-failure", "queue-master-locator",
		"max-age", "stream-max-segment-size-bytes", "initial-cluster-size",
		"selector-fields", "selector-field-max-bytes"},
	QueueTypeClassic: {"max-age", "stream-max-segment-size-bytes", "initial-cluster-size",
		"delivery-limit", "dead-letter-strategy", "max-in-memory-length", "max-in-memory-bytes",
		"target-group-size", "selector-fields", "selector-field-max-bytes"},
}

// matchesQueue reports whether p applies to a queue of type typ named name
// (rabbit_policy:matches/3).
func (p *policy) matchesQueue(name, typ string) bool {
	switch p.rec.ApplyTo {
	case ApplyToAll, ApplyToQueues:
	case ApplyToQuorumQueues:
		if typ != QueueTypeQuorum {
			return false
		}
	case ApplyToClassicQueues:
		if typ != QueueTypeClassic {
			return false
		}
	default:
		return false
	}
	for _, k := range unsupportedPolicies[typ] {
		if _, ok := p.def[k]; ok {
			return false
		}
	}
	return p.re.MatchString(name)
}

func (p *policy) matchesExchange(name string) bool {
	return (p.rec.ApplyTo == ApplyToAll || p.rec.ApplyTo == ApplyToExchanges) && p.re.MatchString(name)
}

// pick returns the policy of set that applies, as rabbit_policy:match/2
// chooses it: the highest priority. RabbitMQ leaves the choice between
// equal priorities to the order its store lists them in; Warren takes
// the first name in byte order, the same on every node.
func pick(set map[string]*policy, matches func(*policy) bool) *policy {
	var best *policy
	for _, p := range set {
		if !matches(p) {
			continue
		}
		if best == nil || p.rec.Priority > best.rec.Priority ||
			(p.rec.Priority == best.rec.Priority && p.rec.Name < best.rec.Name) {
			best = p
		}
	}
	return best
}

// mergePolicyValue is rabbit_policies:merge_policy_value/3: the value of a
// key both the policy and the operator policy set.
func mergePolicyValue(key string, val, opVal any) any {
	switch key {
	case "message-ttl", "max-length", "max-length-bytes", "max-in-memory-length", "max-in-memory-bytes", "expires",
		"delayed-retry-max":
		return minValue(val, opVal)
	case "target-group-size", "delayed-retry-min":
		// rabbit_quorum_queue:merge_policy_value/3: the larger (for
		// delayed retries the longer minimum with the shorter maximum
		// above, and the operator's type, the default below).
		a, aok := asInt(val)
		b, bok := asInt(opVal)
		if aok && bok {
			return max(a, b)
		}
		return opVal
	case "delivery-limit":
		a, aok := asInt(val)
		b, bok := asInt(opVal)
		if aok && bok && (a < 0 || b < 0) {
			return max(a, b) // one of them is unlimited: the other
		}
		return minValue(val, opVal)
	}
	return opVal // overflow, queue-version, booleans: the operator's
}

func minValue(a, b any) any {
	x, xok := asInt(a)
	y, yok := asInt(b)
	if !xok || !yok {
		return b
	}
	return min(x, y)
}

// policyValue is rabbit_policy:get/2: key's value from the policy and the
// operator policy that apply (either may be nil), merged when both set it.
func policyValue(key string, pol, op *policy) (any, bool) {
	var v, ov any
	var ok, ook bool
	if pol != nil {
		v, ok = pol.def[key]
	}
	if op != nil {
		ov, ook = op.def[key]
	}
	switch {
	case ok && ook:
		return mergePolicyValue(key, v, ov), true
	case ok:
		return v, true
	case ook:
		return ov, true
	}
	return nil, false
}

// resolve says how a policy's value and a queue argument's combine
// (the Resolve funs given to rabbit_queue_type_util:args_policy_lookup/3).
type resolve uint8

const (
	resolveMin      resolve = iota // the lower (numbers)
	resolveArg                     // the queue argument
	resolvePolicy                  // the policy
	resolveDelivery                // delivery-limit: min, unless one is negative (unlimited), then max
)

// queuePolicyKeys are the keys Warren applies to queues, per queue type,
// with how each combines with its x-argument: rabbit_quorum_queue:
// gather_policy_config/2 and dead_letter_handler/2, rabbit_queue_type:
// get_consumer_timeout/2 and rabbit_queue_location:leader_locator/1 for
// quorum queues; rabbit_amqqueue_process:process_args_policy/1 for
// classic queues.
var queuePolicyKeys = map[string][]struct {
	key string
	how resolve
}{
	QueueTypeQuorum: {
		{"max-length", resolveMin},
		{"max-length-bytes", resolveMin},
		{"overflow", resolvePolicy},
		{"delivery-limit", resolveDelivery},
		{"expires", resolveMin},
		{"message-ttl", resolveMin},
		{"dead-letter-exchange", resolveArg},
		{"dead-letter-routing-key", resolveArg},
		{"dead-letter-strategy", resolveArg},
		{"consumer-timeout", resolveMin},
		// get_consumer_disconnected_timeout/1: the lower.
		{"consumer-disconnected-timeout", resolveMin},
		{"queue-leader-locator", resolvePolicy},
		// get_delayed_retry_config/1: the policy's type wins, the
		// lower minimum and maximum.
		{"delayed-retry-type", resolvePolicy},
		{"delayed-retry-min", resolveMin},
		{"delayed-retry-max", resolveMin},
	},
	QueueTypeClassic: {
		{"expires", resolveMin},
		{"dead-letter-exchange", resolveArg},
		{"dead-letter-routing-key", resolveArg},
		{"message-ttl", resolveMin},
		{"max-length", resolveMin},
		{"max-length-bytes", resolveMin},
		{"overflow", resolveArg},
		{"consumer-timeout", resolveMin},
	},
}

// effectiveArgs is a queue's x-arguments with its policies applied: for
// each key Warren applies, the policies' value (merged as policyValue
// does) combined with the declared argument as RabbitMQ combines them,
// written back as the x-argument. The result is a new table; args is
// not changed. Without a policy it is args itself.
func effectiveArgs(typ string, args wire.Table, pol, op *policy) wire.Table {
	if pol == nil && op == nil {
		return args
	}
	out := make(wire.Table, len(args)+4)
	for k, v := range args {
		out[k] = v
	}
	for _, pk := range queuePolicyKeys[typ] {
		pv, ok := policyValue(pk.key, pol, op)
		if !ok {
			continue
		}
		ak := "x-" + pk.key
		av, aok := args[ak]
		if !aok {
			out[ak] = pv
			continue
		}
		switch pk.how {
		case resolveMin:
			out[ak] = minValue(pv, av)
		case resolvePolicy:
			out[ak] = pv
		case resolveDelivery:
			p, pok := asInt(pv)
			a, aok := asInt(av)
			if pok && aok && (p < 0 || a < 0) {
				out[ak] = max(p, a)
			} else {
				out[ak] = minValue(pv, av)
			}
		case resolveArg:
			// The declared argument stands.
		}
	}
	// A dead-letter routing key without a dead-letter exchange disables
	// dead-lettering with a warning in RabbitMQ (rabbit_quorum_queue:
	// dlh/5); the queue's rules refuse the combination, so the key goes.
	if _, ok := out["x-dead-letter-exchange"]; !ok {
		delete(out, "x-dead-letter-routing-key")
	}
	// Expiries beyond RabbitMQ's bound (rabbit_misc:check_expiry) are
	// refused by validation on declare; a policy's are capped instead.
	for _, k := range []string{"x-message-ttl", "x-expires"} {
		if n, ok := asInt(out[k]); ok && n > maxExpiry {
			out[k] = int64(maxExpiry)
		}
	}
	return out
}

// maxExpiry is ten years in milliseconds (rabbit_misc:check_expiry/1).
const maxExpiry = 315_360_000_000

// policyRecord builds the record of a policy definition.
func policyRecord(p PolicyDef) (catalog.Policy, error) {
	def, err := encodeTable(p.Definition)
	if err != nil {
		return catalog.Policy{}, err
	}
	return catalog.Policy{
		Vhost: p.Vhost, Name: p.Name, Operator: p.Operator,
		Pattern: p.Pattern, ApplyTo: p.ApplyTo, Definition: def, Priority: p.Priority,
	}, nil
}
