package broker

import (
	"errors"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/classic"
)

// What a queue declaration may say for each queue type, as RabbitMQ 4.3
// checks it (rabbit_amqqueue, rabbit_quorum_queue, rabbit_classic_queue),
// and when a redeclaration is equivalent.

// queueTypeHint guesses a declaration's type before it is validated, for
// placement; the declaration checks it again.
func (qt *queueTable) queueTypeHint(d QueueDeclare) string {
	if t, ok := d.Arguments["x-queue-type"].(string); ok {
		return t
	}
	if d.Durable && !d.Exclusive && !d.AutoDelete {
		return qt.v.defaultQueueType
	}
	return QueueTypeClassic
}

// checkEquivalent compares a redeclaration with the queue as it is.
func (q *Queue) checkEquivalent(d QueueDeclare) error {
	what := q.describe()
	// RabbitMQ checks exclusivity first (check_exclusive_access strict).
	if d.Exclusive != (q.owner != 0) {
		return lockedErr(q.rec.Name, q.vhost.name)
	}
	if d.Durable != q.rec.Durable {
		return inequivalent("durable", what, d.Durable, q.rec.Durable)
	}
	if d.AutoDelete != q.rec.AutoDelete {
		return inequivalent("auto_delete", what, d.AutoDelete, q.rec.AutoDelete)
	}
	if t, ok := d.Arguments["x-queue-type"]; ok && t != q.rec.Type {
		// RabbitMQ records the type as a longstr argument of every queue.
		return argMismatch("x-queue-type", what, t, true, q.rec.Type, true)
	}
	return checkArgsEquivalent(what, comparedQueueArgs, d.Arguments, q.args)
}

// comparedQueueArgs are the arguments whose difference makes a
// redeclaration inequivalent (RabbitMQ's declare_args). x-queue-type is
// compared apart: leaving it out always matches the recorded type.
var comparedQueueArgs = []string{
	"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
	"x-max-length", "x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode",
	"x-queue-version", "x-single-active-consumer", "x-delivery-limit", "x-dead-letter-strategy",
	"x-quorum-initial-group-size", "x-queue-leader-locator", "x-quorum-target-group-size",
}

// classicOnlyArgs are refused on quorum queues.
var classicOnlyArgs = []string{"x-max-priority", "x-queue-mode", "x-queue-version", "x-queue-master-locator"}

// queueType decides the type of a new queue and checks that the
// declaration suits it.
func (qt *queueTable) queueType(d QueueDeclare, serverNamed bool) (string, error) {
	what := describeQueue(d.Name, qt.v.name)
	typ := ""
	if t, ok := d.Arguments["x-queue-type"]; ok {
		s, isStr := t.(string)
		if !isStr {
			return "", wire.Errorf(wire.PreconditionFailed, "invalid arg 'x-queue-type' for %s: {unacceptable_type,%s}", what, typeName(t))
		}
		typ = s
	} else if d.Durable && !d.Exclusive && !d.AutoDelete {
		// The vhost's default type applies only where it can: RabbitMQ
		// keeps exclusive, auto-delete and transient queues classic
		// (rabbit_amqqueue:augment_declare_args). A durable server-named
		// queue does get the default, and so is refused below when that
		// is quorum, as RabbitMQ 4.3 refuses it.
		typ = qt.v.defaultQueueType
	} else {
		typ = QueueTypeClassic
	}
	switch typ {
	case QueueTypeClassic:
		if _, _, err := classic.ParseConfig(d.Arguments); err != nil {
			return "", argError(err, what)
		}
		if err := checkQueueVersion(what, d.Arguments); err != nil {
			return "", err
		}
		if _, ok := d.Arguments["x-queue-master-locator"]; ok && qt.v.b.cfg.DenyQueueMasterLocator {
			// rabbit_classic_queue:validate_arguments, once the
			// arguments passed rabbit_amqqueue's checks.
			return "", deprecatedDenied("queue_master_locator")
		}
	case QueueTypeQuorum:
		if err := checkQuorumDeclare(d, serverNamed, what); err != nil {
			return "", err
		}
		if err := checkPlacementArgs(what, d.Arguments); err != nil {
			return "", err
		}
	default:
		return "", wire.Errorf(wire.PreconditionFailed, "invalid arg 'x-queue-type' for %s: \"unsupported queue type '%s'\"", what, typ)
	}
	for _, k := range []string{"x-expires"} {
		if _, _, err := intArg(what, d.Arguments, k, 1); err != nil {
			return "", err
		}
	}
	for _, k := range []string{"x-message-ttl", "x-max-length", "x-max-length-bytes"} {
		if _, _, err := intArg(what, d.Arguments, k, 0); err != nil {
			return "", err
		}
	}
	return typ, nil
}

// deprecatedDenied is RabbitMQ 4.3's refusal of a deprecated feature that
// is denied by default: a connection error (541) whose text is
// rabbit_deprecated_features' when_denied message for that phase.
func deprecatedDenied(feature string) *wire.Error {
	return wire.Errorf(wire.InternalError, "Feature `%s` is deprecated.\nBy default, this feature is not permitted anymore.\n"+
		"The feature will be removed from a future major RabbitMQ version, regardless of the configuration; actual version to be determined.\n"+
		"To continue using this feature when it is not permitted by default, set the following parameter in your configuration:\n"+
		"    \"deprecated_features.permit.%s = true\"", feature, feature)
}

// checkQueueVersion refuses a classic queue's x-queue-version other than
// 2, as RabbitMQ 4.3 does (rabbit_amqqueue:check_queue_version), which
// removed the version 1 storage. Warren stores classic queues its own way,
// so 2 changes nothing. Only a declaration is checked: a queue declared
// with 1 under an earlier Warren is restored as it was (RabbitMQ 4.3
// converts such queues on upgrade).
func checkQueueVersion(what string, args wire.Table) error {
	n, ok, err := intArg(what, args, "x-queue-version", 0)
	if err != nil || !ok || n == 2 {
		return err
	}
	return wire.Errorf(wire.PreconditionFailed, "invalid arg 'x-queue-version' for %s: \"unsupported queue version '%d'\"", what, n)
}

func checkQuorumDeclare(d QueueDeclare, serverNamed bool, what string) error {
	if serverNamed {
		return wire.Errorf(wire.PreconditionFailed, "Cannot declare a server-named queue for type rabbit_quorum_queue")
	}
	// Arguments are checked before properties, as RabbitMQ's
	// check_declare_arguments runs before the queue type's declare.
	for _, k := range classicOnlyArgs {
		if _, ok := d.Arguments[k]; ok {
			return wire.Errorf(wire.PreconditionFailed, "invalid arg '%s' for %s of queue type rabbit_quorum_queue", k, what)
		}
	}
	switch {
	case d.AutoDelete:
		return wire.Errorf(wire.PreconditionFailed, "invalid property 'auto-delete' for %s", what)
	case d.Exclusive:
		return wire.Errorf(wire.PreconditionFailed, "invalid property 'exclusive-owner' for %s", what)
	case !d.Durable:
		return wire.Errorf(wire.PreconditionFailed, "invalid property 'non-durable' for %s", what)
	}
	if o, ok := d.Arguments["x-overflow"]; ok && o == "reject-publish-dlx" {
		return wire.Errorf(wire.PreconditionFailed, "invalid arg 'x-overflow' with value 'reject-publish-dlx' for %s of queue type rabbit_quorum_queue", what)
	}
	if _, err := raftq.ParseConfig(map[string]any(d.Arguments)); err != nil {
		return argError(err, what)
	}
	return nil
}

// argError is the 406 for a queue argument the queue's rules refuse,
// with RabbitMQ's "invalid arg" text.
func argError(err error, what string) error {
	var ae *raftq.ArgError
	if errors.As(err, &ae) {
		return wire.Errorf(wire.PreconditionFailed, "%s", ae.For(what))
	}
	return wire.Errorf(wire.PreconditionFailed, "invalid arguments for %s: %v", what, err)
}
