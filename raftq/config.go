package raftq

import (
	"fmt"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
)

// Defaults RabbitMQ 4.3 applies when a quorum queue's arguments say nothing.
const (
	// DefaultDeliveryLimit is x-delivery-limit's default since RabbitMQ 4.0
	// (rabbit_quorum_queue:get_delivery_limit, ?DEFAULT_DELIVERY_LIMIT).
	DefaultDeliveryLimit = 20
	// DefaultConsumerTimeout is rabbit.consumer_timeout's default, 30
	// minutes (rabbit_fifo.erl ?DEFAULT_CONSUMER_TIMEOUT_MS = 1_800_000).
	DefaultConsumerTimeout = int64(30 * time.Minute / time.Millisecond)
	// UnlimitedPrefetch is the credit a consumer with prefetch 0 gets:
	// rabbit_fifo_client turns {simple_prefetch, 0} into 2000
	// (?UNLIMITED_PREFETCH_COUNT, "something large for ra").
	UnlimitedPrefetch = 2000
	// maxExpiry bounds x-message-ttl and x-expires: ten years in
	// milliseconds (rabbit_misc:check_expiry).
	maxExpiry = 315_360_000_000
)

// Unset marks an optional limit that is not configured.
const Unset = -1

// Overflow is x-overflow: what a full queue does with a new message.
type Overflow uint8

const (
	// DropHead dead-letters (reason maxlen) or drops the oldest ready
	// messages. The default.
	DropHead Overflow = iota
	// RejectPublish refuses the new message: its publisher gets basic.nack.
	RejectPublish
)

// Strategy is x-dead-letter-strategy.
type Strategy uint8

const (
	// AtMostOnce hands a dead-lettered message to the runtime and forgets it.
	AtMostOnce Strategy = iota
	// AtLeastOnce keeps a dead-lettered message, counted against the
	// queue's limits, until the runtime reports its target queues confirmed
	// it (DeadLetterSettled).
	AtLeastOnce
)

// Config is a quorum queue's behaviour as its effective arguments set it.
// Every member of the queue's Raft group builds its machine from the same
// Config. When a policy changes the effective arguments (declared ones
// winning over the policy's, operator policies winning where lower, as the
// broker computes them), an UpdateConfig command carries the new Config
// through the log, so every member changes at the same index; see
// Machine.updateConfig for which settings change what is already queued.
type Config struct {
	// DeliveryLimit is x-delivery-limit: a message whose delivery-count
	// exceeds it is dead-lettered (reason delivery_limit) instead of being
	// requeued. Negative means unlimited.
	DeliveryLimit int64
	// DeadLettering is set when x-dead-letter-exchange is (even to "", the
	// default exchange); without it dead-lettered messages are dropped.
	DeadLettering        bool
	DeadLetterExchange   string
	DeadLetterRoutingKey string
	// HasDeadLetterRoutingKey says x-dead-letter-routing-key was given:
	// dead-lettered messages use it instead of their own routing keys.
	HasDeadLetterRoutingKey bool
	// Strategy is the effective x-dead-letter-strategy: at-least-once only
	// with dead-lettering on and x-overflow=reject-publish, otherwise
	// RabbitMQ falls back to at-most-once (rabbit_quorum_queue:dlh/5).
	Strategy Strategy
	// MessageTTL is x-message-ttl in milliseconds, or Unset.
	MessageTTL int64
	// MaxLength and MaxLengthBytes are x-max-length and
	// x-max-length-bytes (ready messages and their body bytes), or Unset.
	MaxLength      int64
	MaxLengthBytes int64
	Overflow       Overflow
	// Expires is x-expires in milliseconds, or Unset.
	Expires int64
	// SingleActiveConsumer is x-single-active-consumer.
	SingleActiveConsumer bool
	// ConsumerTimeout is x-consumer-timeout in milliseconds, or
	// DefaultConsumerTimeout. ConsumerTimeoutSet says the argument was
	// given; when it was not, the runtime may put the node's configured
	// consumer_timeout here before building the machine.
	ConsumerTimeout    int64
	ConsumerTimeoutSet bool
	// ClassicPriority gives messages a classic queue's priorities instead
	// of a quorum queue's (the priority guide): the level is the priority
	// property capped at MaxPriority (x-max-priority), and a message
	// without one counts as 0, not 4. Without x-max-priority (MaxPriority
	// 0) every message is at level 0 and the queue is plain FIFO. The
	// machine has 32 levels, so x-max-priority above 31 behaves as 31.
	// ParseConfig never sets it (x-max-priority is refused on quorum
	// queues); a runtime without Raft (raftq/classic) does, and since such
	// a runtime takes no snapshots these fields are not in them.
	ClassicPriority bool
	MaxPriority     uint8
	// Retry is RabbitMQ 4.3's delayed retry (x-delayed-retry-type, -min,
	// -max): which returned messages wait before they are ready again.
	Retry DelayedRetry
}

// RetryType is x-delayed-retry-type: which returns wait.
type RetryType uint8

const (
	// RetryDisabled: every returned message is ready again at once.
	RetryDisabled RetryType = iota
	// RetryAll delays every return.
	RetryAll
	// RetryFailed delays failed deliveries only (basic.reject, a lost
	// consumer: those that raise delivery-count).
	RetryFailed
	// RetryReturned delays the others only (basic.nack, basic.recover,
	// the consumer timeout).
	RetryReturned
)

var retryTypeNames = [...]string{"disabled", "all", "failed", "returned"}

func (t RetryType) String() string {
	if int(t) < len(retryTypeNames) {
		return retryTypeNames[t]
	}
	return fmt.Sprintf("retry(%d)", uint8(t))
}

// DelayedRetry is a quorum queue's delayed retry (rabbit_quorum_queue
// get_delayed_retry_config/1, rabbit_fifo should_delay/5): a return of
// the kind Type names waits min(Min × delivery-count, Max) milliseconds
// (delivery-count counted as at least 1) before the message is ready
// again, ahead of never-delivered messages as any return. Waiting
// messages count against the length limits but not as ready.
type DelayedRetry struct {
	Type     RetryType
	Min, Max int64 // milliseconds, 0 < Min <= Max when Type is set
}

// delays says whether a return for cause waits.
func (r DelayedRetry) delays(cause ReturnCause) bool {
	switch r.Type {
	case RetryAll:
		return true
	case RetryFailed:
		return cause.failed()
	case RetryReturned:
		return !cause.failed()
	}
	return false
}

// DefaultConfig is the Config of a quorum queue declared without arguments.
func DefaultConfig() Config {
	return Config{
		DeliveryLimit:   DefaultDeliveryLimit,
		MessageTTL:      Unset,
		MaxLength:       Unset,
		MaxLengthBytes:  Unset,
		Expires:         Unset,
		ConsumerTimeout: DefaultConsumerTimeout,
	}
}

// ArgError is RabbitMQ's "invalid arg" precondition failure (406) for a
// queue argument. Detail is the reason as RabbitMQ prints it (an Erlang
// term: {value_negative,-1}, invalid_overflow, ...).
type ArgError struct {
	Key    string
	Detail string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("invalid arg '%s': %s", e.Key, e.Detail)
}

// For is the error text RabbitMQ sends in channel.close, given the queue as
// it describes it ("queue 'q' in vhost '/'"): rabbit_amqqueue's
// check_arguments_type_and_value formats "invalid arg '~ts' for ~ts: ~255p".
func (e *ArgError) For(what string) string {
	return fmt.Sprintf("invalid arg '%s' for %s: %s", e.Key, what, e.Detail)
}

// ParseConfig reads a quorum queue's declared arguments, validating them
// as RabbitMQ 4.3 does (rabbit_amqqueue:declare_args/0, checked in that
// order, so the first error is the one RabbitMQ reports). Arguments this
// package does not use are ignored; refusing classic-only ones is the
// broker's job.
func ParseConfig(args map[string]any) (Config, error) {
	c := DefaultConfig()
	var err error
	if c.Expires, err = expiryArg(args, "x-expires", true); err != nil {
		return c, err
	}
	if c.MessageTTL, err = expiryArg(args, "x-message-ttl", false); err != nil {
		return c, err
	}
	if v, ok := args["x-dead-letter-exchange"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return c, unacceptable("x-dead-letter-exchange", v)
		}
		c.DeadLettering, c.DeadLetterExchange = true, s
	}
	if v, ok := args["x-dead-letter-routing-key"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return c, unacceptable("x-dead-letter-routing-key", v)
		}
		if !c.DeadLettering {
			return c, &ArgError{"x-dead-letter-routing-key", "routing_key_but_no_dlx_defined"}
		}
		c.DeadLetterRoutingKey, c.HasDeadLetterRoutingKey = s, true
	}
	atLeastOnce := false
	if v, ok := args["x-dead-letter-strategy"]; ok {
		s, isStr := v.(string)
		switch {
		case !isStr:
			return c, unacceptable("x-dead-letter-strategy", v)
		case s == "at-least-once":
			atLeastOnce = true
		case s != "at-most-once":
			return c, &ArgError{"x-dead-letter-strategy", "invalid_dlx_strategy"}
		}
	}
	for _, k := range []string{"x-max-length", "x-max-length-bytes", "x-max-in-memory-length", "x-max-in-memory-bytes"} {
		n, err := nonNegArg(args, k)
		if err != nil {
			return c, err
		}
		switch k {
		case "x-max-length":
			c.MaxLength = n
		case "x-max-length-bytes":
			c.MaxLengthBytes = n
		}
	}
	if v, ok := args["x-overflow"]; ok {
		s, isStr := v.(string)
		switch {
		case !isStr:
			return c, unacceptable("x-overflow", v)
		case s == "reject-publish":
			c.Overflow = RejectPublish
		case s == "drop-head":
		case s == "reject-publish-dlx":
			// Valid for classic queues; a quorum queue logs a warning and
			// uses the default (rabbit_quorum_queue:overflow/3). The
			// broker refuses the declaration before it gets here.
		default:
			return c, &ArgError{"x-overflow", "invalid_overflow"}
		}
	}
	if v, ok := args["x-single-active-consumer"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return c, unacceptable("x-single-active-consumer", v)
		}
		c.SingleActiveConsumer = b
	}
	if n, err := nonNegArg(args, "x-consumer-timeout"); err != nil {
		return c, err
	} else if n != Unset {
		c.ConsumerTimeout, c.ConsumerTimeoutSet = n, true
	}
	// RabbitMQ 4.3's consumer disconnected timeout is the runtime's
	// (replica.DisconnectedTimeout), not the machine's: checked here,
	// in declare_args' order, and not kept.
	if _, err := nonNegArg(args, "x-consumer-disconnected-timeout"); err != nil {
		return c, err
	}
	// x-delivery-limit is not among declare_args: RabbitMQ accepts any
	// value and uses the default for one that is not an integer
	// (get_delivery_limit/3).
	if v, ok := args["x-delivery-limit"]; ok {
		if n, isInt := intValue(v); isInt {
			c.DeliveryLimit = n
		}
	}
	if atLeastOnce && c.DeadLettering && c.Overflow == RejectPublish {
		c.Strategy = AtLeastOnce
	}
	c.Retry = retryArgs(args)
	return c, nil
}

// retryArgs reads x-delayed-retry-type, -min and -max as RabbitMQ 4.3
// does (get_delayed_retry_config/1): they are not among declare_args, so
// nothing is refused; a type other than all, failed or returned, or a
// missing or non-positive minimum, leaves retries undelayed, and a
// missing or bad maximum is the minimum. A maximum below the minimum
// (which a policy could not set) caps every delay at it.
func retryArgs(args map[string]any) DelayedRetry {
	var r DelayedRetry
	switch args["x-delayed-retry-type"] {
	case "all":
		r.Type = RetryAll
	case "failed":
		r.Type = RetryFailed
	case "returned":
		r.Type = RetryReturned
	default:
		return DelayedRetry{}
	}
	var ok bool
	if r.Min, ok = intValue(args["x-delayed-retry-min"]); !ok || r.Min <= 0 {
		return DelayedRetry{}
	}
	if r.Max, ok = intValue(args["x-delayed-retry-max"]); !ok || r.Max <= 0 {
		r.Max = r.Min
	}
	return r
}

// expiryArg reads x-expires (zero refused) or x-message-ttl
// (rabbit_amqqueue:check_expires_arg / check_message_ttl_arg).
func expiryArg(args map[string]any, key string, refuseZero bool) (int64, error) {
	v, ok := args[key]
	if !ok {
		return Unset, nil
	}
	n, err := intArg(key, v)
	switch {
	case err != nil:
		return Unset, err
	case refuseZero && n == 0:
		return Unset, &ArgError{key, "{value_zero,0}"}
	case n < 0:
		return Unset, &ArgError{key, fmt.Sprintf("{value_negative,%d}", n)}
	case n > maxExpiry:
		return Unset, &ArgError{key, fmt.Sprintf("{value_too_large,%d}", n)}
	}
	return n, nil
}

// nonNegArg is rabbit_amqqueue:check_non_neg_int_arg.
func nonNegArg(args map[string]any, key string) (int64, error) {
	v, ok := args[key]
	if !ok {
		return Unset, nil
	}
	n, err := intArg(key, v)
	if err != nil {
		return Unset, err
	}
	if n < 0 {
		return Unset, &ArgError{key, fmt.Sprintf("{value_negative,%d}", n)}
	}
	return n, nil
}

// intArg is rabbit_amqqueue:check_int_arg: any integer field type, else a
// formatted string, which ~p prints in double quotes.
func intArg(key string, v any) (int64, error) {
	n, ok := intValue(v)
	if !ok {
		return 0, &ArgError{key, fmt.Sprintf("%q", "expected integer, got "+fieldType(v))}
	}
	return n, nil
}

func unacceptable(key string, v any) error {
	return &ArgError{key, "{unacceptable_type," + fieldType(v) + "}"}
}

// intValue accepts RabbitMQ's ?INTEGER_ARG_TYPES.
var intValue = wire.IntValue

// fieldType is RabbitMQ's name for a field-table value's type.
var fieldType = wire.TypeName
