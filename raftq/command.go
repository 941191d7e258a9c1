package raftq

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Op says what a command does. It is the first byte of its log entry.
// Opcodes are only ever appended: a value, once used, keeps its meaning for
// the life of every log that holds it.
type Op uint8

const (
	opInvalid Op = iota // never written: a zeroed entry fails to decode
	// OpEnqueue stores a message. Its log index becomes the message's ID.
	OpEnqueue
	// OpPublisherDown drops a publisher's deduplication record.
	OpPublisherDown
	// OpAttach adds a consumer (basic.consume), or updates one.
	OpAttach
	// OpDetach cancels a consumer (basic.cancel): its unsettled messages
	// stay checked out to it and can still be settled, returned or discarded.
	OpDetach
	// OpConsumerDown removes a consumer whose channel or connection is gone:
	// its unsettled messages return, delivery-count +1.
	OpConsumerDown
	// OpSettle acknowledges messages (basic.ack, multiple already resolved).
	OpSettle
	// OpReturn puts messages back, with a ReturnCause.
	OpReturn
	// OpDiscard dead-letters messages rejected or nacked without requeue.
	OpDiscard
	// OpPurge removes every ready message.
	OpPurge
	// OpGet takes one message for basic.get.
	OpGet
	// OpTick brings the queue's clock to Now: expiries and timeouts fire.
	OpTick
	// OpDeadLetterSettled tells the queue that at-least-once dead-lettered
	// messages reached their target queues.
	OpDeadLetterSettled
	// OpTouch renews the x-expires lease (a redeclaration).
	OpTouch
	// OpUpdateConfig makes Config the queue's configuration (a policy
	// changed its effective arguments). See Machine.updateConfig for what
	// changes at once and what only for later messages and consumers.
	OpUpdateConfig
	// OpSuspend marks an attached consumer suspected down: its link to
	// the leader broke, and it may come back. It keeps its place (an
	// exclusive or single active consumer stays so) and what it holds,
	// but is handed nothing until it attaches again (RabbitMQ 4.3's
	// suspected_down consumer).
	OpSuspend
	// OpUpgrade raises the machine version the queue runs (Version), once
	// every member's node applies it: the leader proposes it
	// (version.go). From machine version 2 on, OpSuspend suspends.
	OpUpgrade

	opCount // first unused opcode; new opcodes go just above this line
)

var opNames = [...]string{
	opInvalid:           "invalid",
	OpEnqueue:           "enqueue",
	OpPublisherDown:     "publisher-down",
	OpAttach:            "attach",
	OpDetach:            "detach",
	OpConsumerDown:      "consumer-down",
	OpSuspend:           "suspend",
	OpUpgrade:           "upgrade",
	OpSettle:            "settle",
	OpReturn:            "return",
	OpDiscard:           "discard",
	OpPurge:             "purge",
	OpGet:               "get",
	OpTick:              "tick",
	OpDeadLetterSettled: "dead-letter-settled",
	OpTouch:             "touch",
	OpUpdateConfig:      "update-config",
}

func (o Op) String() string {
	if o < opCount {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ConsumerID names a consumer, or a basic.get owner, within one queue. The
// runtime assigns them (one per basic.consume, and one per channel for
// basic.get), never reusing one while the queue might still know it.
type ConsumerID uint64

// ReturnCause says why a delivered message came back. The values match
// queue.ReturnCause, plus ReturnTimeout.
type ReturnCause uint8

const (
	// ReturnNack is basic.nack (or basic.recover) with requeue:
	// acquired-count rises, delivery-count does not.
	ReturnNack ReturnCause = iota
	// ReturnReject is basic.reject with requeue: delivery-count +1.
	ReturnReject
	// ReturnConsumerGone is a channel or connection closed with the
	// message unsettled: delivery-count +1.
	ReturnConsumerGone
	// ReturnTimeout is the consumer timeout, or the consumer disconnected
	// timeout (queue.ReturnDisconnected): delivery-count unchanged.
	ReturnTimeout

	causeCount
)

var causeNames = [...]string{"nack", "reject", "gone", "timeout"}

func (c ReturnCause) String() string {
	if c < causeCount {
		return causeNames[c]
	}
	return fmt.Sprintf("cause(%d)", uint8(c))
}

// failed says whether the cause counts as a failed delivery attempt, which
// raises delivery-count (RabbitMQ 4.3's "When is delivery count
// incremented?" table in the quorum queue guide).
func (c ReturnCause) failed() bool { return c == ReturnReject || c == ReturnConsumerGone }

// Command is one state machine input, as decoded from a log entry. It is
// one flat struct rather than a type per operation so that a decoder can
// reuse one value for every entry without allocating; each field says which
// operations use it, the others leave it zero.
type Command struct {
	Op Op
	// Now is the leader's clock (Unix milliseconds) when it proposed the
	// command. Every command carries it because nearly every command can
	// hand out a message, and a delivery starts a consumer-timeout clock.
	Now int64

	// Publisher and Seq identify a publish for its confirm and for
	// deduplication (Enqueue); Publisher alone for PublisherDown. Publisher
	// 0 is untracked: never deduplicated, never confirmed.
	Publisher uint64
	Seq       uint64

	// Size is the message's body size, the unit of x-max-length-bytes
	// (Enqueue).
	Size uint32
	// Priority is the message's priority property, if HasPriority (Enqueue).
	Priority    uint8
	HasPriority bool
	// TTL is the message's expiration property in milliseconds, if HasTTL
	// (Enqueue).
	TTL    int64
	HasTTL bool
	// Payload is the message itself (exchange, routing key, properties,
	// body) as the runtime encodes it (Enqueue). The machine never reads it
	// and keeps none of it: the runtime reads it back from the log by the
	// message's index. Decoding aliases the entry's bytes.
	Payload []byte

	// Consumer names the consumer (Attach, Detach, ConsumerDown, Settle,
	// Return, Discard) or the basic.get owner (Get).
	Consumer ConsumerID

	// Prefetch is the consumer's prefetch count, 0 for unlimited (Attach).
	Prefetch uint32
	// ConsumerPriority is x-priority (Attach).
	ConsumerPriority int32
	// Exclusive is basic.consume's exclusive flag (Attach).
	Exclusive bool
	// Timeout is the consumer's x-consumer-timeout in milliseconds, if
	// HasTimeout (Attach); otherwise the queue's applies.
	Timeout    int64
	HasTimeout bool
	// Resume: the consumer attaches again, through a new leader, and has
	// received its deliveries up to LastDelivery (Effect.Delivery); the
	// ones it holds numbered above were lost with the old leader and come
	// back to the queue first (Attach).
	Resume       bool
	LastDelivery uint64

	// Cause is why messages come back (Return) or were refused (Discard:
	// ReturnReject raises delivery-count, ReturnNack does not).
	Cause ReturnCause

	// NoAck is basic.get's no-ack: the message is gone once taken (Get).
	NoAck bool

	// IDs are message IDs (Settle, Return, Discard, DeadLetterSettled).
	IDs []uint64

	// Version is the machine version to run from here on (Upgrade).
	Version uint32

	// Config is the queue's new configuration (UpdateConfig). Its
	// ClassicPriority and MaxPriority are not encoded (they decode as
	// zero): a queue's priorities never change, and neither does
	// SingleActiveConsumer, which the machine keeps whatever this says.
	Config Config
}

// ErrDecode is wrapped by every Decode error.
var ErrDecode = errors.New("raftq: bad command")

// Flag bits of the commands that have a flags byte.
const (
	flagPriority  = 1 << 0 // Enqueue
	flagTTL       = 1 << 1 // Enqueue
	flagExclusive = 1 << 0 // Attach
	flagTimeout   = 1 << 1 // Attach
	flagResume    = 1 << 2 // Attach
	flagNoAck     = 1 << 0 // Get
)

// configVersion numbers the layout of the Config record in an UpdateConfig
// entry, which is the record snapshots hold (writer.config, decoder.config):
// one encoder and one decoder for both, so they cannot drift. Changing the
// record's layout means a new configVersion and a new snapshotVersion, and
// decoding both the old and the new.
const configVersion = 1

// Append encodes c onto buf: the opcode byte, then the fields the operation
// uses as varints (IDs delta-encoded), then, for Enqueue, the payload to the
// end of the entry, and for UpdateConfig, configVersion and the Config
// record.
func (c *Command) Append(buf []byte) []byte {
	buf = append(buf, byte(c.Op))
	buf = binary.AppendVarint(buf, c.Now)
	switch c.Op {
	case OpEnqueue:
		buf = binary.AppendUvarint(buf, c.Publisher)
		buf = binary.AppendUvarint(buf, c.Seq)
		buf = binary.AppendUvarint(buf, uint64(c.Size))
		var flags byte
		if c.HasPriority {
			flags |= flagPriority
		}
		if c.HasTTL {
			flags |= flagTTL
		}
		buf = append(buf, flags)
		if c.HasPriority {
			buf = append(buf, c.Priority)
		}
		if c.HasTTL {
			buf = binary.AppendVarint(buf, c.TTL)
		}
		buf = append(buf, c.Payload...)
	case OpPublisherDown:
		buf = binary.AppendUvarint(buf, c.Publisher)
	case OpAttach:
		buf = binary.AppendUvarint(buf, uint64(c.Consumer))
		buf = binary.AppendUvarint(buf, uint64(c.Prefetch))
		buf = binary.AppendVarint(buf, int64(c.ConsumerPriority))
		var flags byte
		if c.Exclusive {
			flags |= flagExclusive
		}
		if c.HasTimeout {
			flags |= flagTimeout
		}
		if c.Resume {
			flags |= flagResume
		}
		buf = append(buf, flags)
		if c.HasTimeout {
			buf = binary.AppendVarint(buf, c.Timeout)
		}
		if c.Resume {
			buf = binary.AppendUvarint(buf, c.LastDelivery)
		}
	case OpDetach, OpConsumerDown, OpSuspend:
		buf = binary.AppendUvarint(buf, uint64(c.Consumer))
	case OpSettle:
		buf = binary.AppendUvarint(buf, uint64(c.Consumer))
		buf = appendIDs(buf, c.IDs)
	case OpReturn, OpDiscard:
		buf = binary.AppendUvarint(buf, uint64(c.Consumer))
		buf = append(buf, byte(c.Cause))
		buf = appendIDs(buf, c.IDs)
	case OpGet:
		buf = binary.AppendUvarint(buf, uint64(c.Consumer))
		var flags byte
		if c.NoAck {
			flags |= flagNoAck
		}
		buf = append(buf, flags)
	case OpDeadLetterSettled:
		buf = appendIDs(buf, c.IDs)
	case OpUpgrade:
		buf = binary.AppendUvarint(buf, uint64(c.Version))
	case OpUpdateConfig:
		w := writer{b: buf}
		w.uvarint(configVersion)
		w.config(&c.Config)
		buf = w.b
	case OpPurge, OpTick, OpTouch:
	default:
		panic(fmt.Sprintf("raftq: encoding unknown op %d", c.Op))
	}
	return buf
}

func appendIDs(buf []byte, ids []uint64) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(ids)))
	var prev uint64
	for _, id := range ids {
		buf = binary.AppendVarint(buf, int64(id-prev))
		prev = id
	}
	return buf
}

// Decode reads a command from a log entry into c, reusing c.IDs' storage.
// It refuses an unknown opcode, a truncated entry, trailing bytes, unknown
// flag bits and out-of-range values with an error wrapping ErrDecode: a
// replica must stop on an entry it does not understand rather than skip it
// and diverge. c.Payload aliases data.
func Decode(data []byte, c *Command) error {
	ids := c.IDs[:0]
	*c = Command{}
	d := decoder{b: data}
	c.Op = Op(d.byte())
	if d.err == nil && (c.Op == opInvalid || c.Op >= opCount) {
		return fmt.Errorf("%w: unknown opcode %d", ErrDecode, data[0])
	}
	c.Now = d.varint()
	switch c.Op {
	case OpEnqueue:
		c.Publisher = d.uvarint()
		c.Seq = d.uvarint()
		c.Size = d.uint32()
		flags := d.flags(flagPriority | flagTTL)
		if flags&flagPriority != 0 {
			c.HasPriority, c.Priority = true, d.byte()
		}
		if flags&flagTTL != 0 {
			c.HasTTL, c.TTL = true, d.varint()
			if d.err == nil && c.TTL < 0 {
				d.fail("negative ttl %d", c.TTL)
			}
		}
		if d.err == nil {
			c.Payload = d.b[d.off:]
			d.off = len(d.b)
		}
	case OpPublisherDown:
		c.Publisher = d.uvarint()
	case OpAttach:
		c.Consumer = ConsumerID(d.uvarint())
		c.Prefetch = d.uint32()
		p := d.varint()
		if d.err == nil && (p < -1<<31 || p > 1<<31-1) {
			d.fail("consumer priority %d out of range", p)
		}
		c.ConsumerPriority = int32(p)
		flags := d.flags(flagExclusive | flagTimeout | flagResume)
		c.Exclusive = flags&flagExclusive != 0
		if flags&flagTimeout != 0 {
			c.HasTimeout, c.Timeout = true, d.varint()
			if d.err == nil && c.Timeout < 0 {
				d.fail("negative consumer timeout %d", c.Timeout)
			}
		}
		if flags&flagResume != 0 {
			c.Resume, c.LastDelivery = true, d.uvarint()
		}
	case OpDetach, OpConsumerDown, OpSuspend:
		c.Consumer = ConsumerID(d.uvarint())
	case OpSettle:
		c.Consumer = ConsumerID(d.uvarint())
		c.IDs = d.ids(ids)
	case OpReturn, OpDiscard:
		c.Consumer = ConsumerID(d.uvarint())
		c.Cause = ReturnCause(d.byte())
		if d.err == nil && c.Cause >= causeCount {
			d.fail("unknown return cause %d", c.Cause)
		}
		c.IDs = d.ids(ids)
	case OpGet:
		c.Consumer = ConsumerID(d.uvarint())
		c.NoAck = d.flags(flagNoAck)&flagNoAck != 0
	case OpDeadLetterSettled:
		c.IDs = d.ids(ids)
	case OpUpgrade:
		// A version this build does not apply is refused here, so that
		// the member stops on it (with the reason) rather than applying
		// the entries that follow as an older machine.
		c.Version = d.uint32()
		if d.err == nil && (c.Version < 2 || c.Version > MachineVersion) {
			d.fail("machine version %d, this build applies 1 to %d", c.Version, MachineVersion)
		}
	case OpUpdateConfig:
		if v := d.uvarint(); d.err == nil && v != configVersion {
			d.fail("config version %d, this build reads %d", v, configVersion)
		}
		c.Config = d.config()
	case OpPurge, OpTick, OpTouch:
	}
	if c.IDs == nil {
		c.IDs = ids // keep the storage for the next entry
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d trailing bytes", len(d.b)-d.off)
	}
	if d.err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDecode, c.Op, d.err)
	}
	return nil
}

// decoder reads bounds-checked fields; after the first error every read
// returns zero and the error sticks.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail("truncated at byte %d", d.off)
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint at byte %d", d.off)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint at byte %d", d.off)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) uint32() uint32 {
	v := d.uvarint()
	if d.err == nil && v > 1<<32-1 {
		d.fail("value %d out of range", v)
	}
	return uint32(v)
}

// string reads a length-prefixed string, refusing a length larger than
// what remains before allocating.
func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("string of %d bytes in %d", n, len(d.b)-d.off)
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

// flags reads a flags byte, refusing bits outside known.
func (d *decoder) flags(known byte) byte {
	f := d.byte()
	if d.err == nil && f&^known != 0 {
		d.fail("unknown flags %#x", f)
	}
	return f
}

// ids reads a delta-encoded ID list into dst. Each ID takes at least one
// byte, so a count larger than what remains is refused before allocating.
func (d *decoder) ids(dst []uint64) []uint64 {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("%d ids in %d bytes", n, len(d.b)-d.off)
		return nil
	}
	var prev uint64
	for i := uint64(0); i < n; i++ {
		prev += uint64(d.varint())
		dst = append(dst, prev)
	}
	if d.err != nil {
		return nil
	}
	return dst
}
