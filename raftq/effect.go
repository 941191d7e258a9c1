package raftq

import (
	"fmt"
	"strconv"
)

// EffectKind says what the runtime must do.
type EffectKind uint8

const (
	// EffectDeliver: send message Index to Consumer.
	EffectDeliver EffectKind = iota + 1
	// EffectConfirm: basic.ack publish Seq of Publisher (it is stored, or
	// was already: a re-sent duplicate is confirmed again).
	EffectConfirm
	// EffectReject: basic.nack publish Seq of Publisher (x-overflow
	// reject-publish refused it). A duplicate of a refused publish is
	// refused again.
	EffectReject
	// EffectOutOfSequence: publish Seq of Publisher was not stored because
	// the queue expects Index (the next sequence number) first; the
	// runtime re-sends from there.
	EffectOutOfSequence
	// EffectDeadLetter: republish message Index to the dead-letter exchange
	// with an x-death entry for Reason at Time (see RecordDeath). With
	// AtLeastOnce, the queue keeps the message until DeadLetterSettled.
	EffectDeadLetter
	// EffectDrop: message Index left the queue for Reason with nowhere to
	// go: no dead-letter exchange, or an at-least-once dead letter that an
	// UpdateConfig ending at-least-once dead-lettering deleted (Reason is
	// why it was dead-lettered; the runtime stops sending it).
	// Informational otherwise, for metrics.
	EffectDrop
	// EffectCancelConsumer: the queue cancelled Consumer for Reason
	// (consumer_timeout): send basic.cancel if the client announced
	// consumer_cancel_notify, otherwise close its channel with 406.
	EffectCancelConsumer
	// EffectConsumerRefused: an Attach was refused (Reason exclusive:
	// 403 ACCESS_REFUSED "queue in exclusive use"; or id_in_use).
	EffectConsumerRefused
	// EffectActive: with single active consumer, Consumer became the
	// active one (Active) or went back to waiting (!Active).
	EffectActive
	// EffectGetResult: the basic.get of Consumer took message Index; Count
	// messages remain ready (basic.get-ok's message-count).
	EffectGetResult
	// EffectGetEmpty: the basic.get of Consumer found nothing (get-empty).
	EffectGetEmpty
	// EffectPurged: Count messages were purged (purge-ok).
	EffectPurged
	// EffectDeleteQueue: the queue has been unused for x-expires; delete it.
	EffectDeleteQueue
)

var effectNames = [...]string{
	EffectDeliver:         "deliver",
	EffectConfirm:         "confirm",
	EffectReject:          "reject",
	EffectOutOfSequence:   "out-of-sequence",
	EffectDeadLetter:      "dead-letter",
	EffectDrop:            "drop",
	EffectCancelConsumer:  "cancel",
	EffectConsumerRefused: "refused",
	EffectActive:          "active",
	EffectGetResult:       "get-ok",
	EffectGetEmpty:        "get-empty",
	EffectPurged:          "purged",
	EffectDeleteQueue:     "delete-queue",
}

func (k EffectKind) String() string {
	if int(k) < len(effectNames) && effectNames[k] != "" {
		return effectNames[k]
	}
	return fmt.Sprintf("effect(%d)", uint8(k))
}

// Reason says why a message was dead-lettered or dropped, or why a
// consumer was cancelled or refused.
type Reason uint8

const (
	reasonNone Reason = iota
	// Dead-letter reasons, named as in x-death (rabbit_dead_letter:reason()).
	ReasonRejected
	ReasonExpired
	ReasonMaxLen
	ReasonDeliveryLimit
	// ReasonConsumerTimeout: a delivery stayed unacknowledged past the
	// consumer timeout.
	ReasonConsumerTimeout
	// ReasonExclusive: another consumer has, or wants, exclusive access.
	ReasonExclusive
	// ReasonIDInUse: the consumer ID names a basic.get owner.
	ReasonIDInUse
	// ReasonPurged: gone by queue.purge (recorded, never in an effect).
	ReasonPurged
	// ReasonSettled: acknowledged, or taken by a no-ack basic.get
	// (recorded, never in an effect).
	ReasonSettled
)

var reasonNames = [...]string{
	reasonNone:            "",
	ReasonRejected:        "rejected",
	ReasonExpired:         "expired",
	ReasonMaxLen:          "maxlen",
	ReasonDeliveryLimit:   "delivery_limit",
	ReasonConsumerTimeout: "consumer_timeout",
	ReasonExclusive:       "exclusive",
	ReasonIDInUse:         "id_in_use",
	ReasonPurged:          "purged",
	ReasonSettled:         "settled",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Effect is one thing the runtime does after a command is applied, on the
// leader only. It is a flat value (no pointers, so a slice of them costs
// the garbage collector nothing); Kind says which fields mean something.
type Effect struct {
	Kind   EffectKind
	Reason Reason
	// Redelivered is the deliver's or get-ok's redelivered flag: the
	// message was handed out before (RabbitMQ: acquired-count > 0).
	Redelivered bool
	// AtLeastOnce marks a dead-letter the queue keeps until settled.
	AtLeastOnce bool
	// Active is the new single-active-consumer status (EffectActive).
	Active   bool
	Consumer ConsumerID
	// Index is the message's ID, the log index of its enqueue, from which
	// the runtime reads it. For EffectOutOfSequence, the expected Seq.
	Index uint64
	// Delivery numbers a handing-out (Deliver, and GetResult unless
	// no-ack) on every member alike: the ID the consumer settles it by,
	// which Machine.HeldBy turns back into consumer and message.
	Delivery  uint64
	Publisher uint64
	Seq       uint64
	// DeliveryCount is the message's delivery-count (x-delivery-count):
	// failed deliveries so far.
	DeliveryCount uint32
	// AcquiredCount is how many times the message was handed out before
	// this delivery (x-acquired-count; Deliver, GetResult), or in all
	// (DeadLetter, Drop).
	AcquiredCount uint32
	// Count is the ready messages left (GetResult, GetEmpty) or purged
	// (Purged).
	Count uint32
	// Time is the queue's clock when the effect arose (DeadLetter: the
	// x-death time).
	Time int64
}

// String renders e compactly, as the testdata scripts show effects.
func (e Effect) String() string {
	b := []byte(e.Kind.String())
	num := func(name string, v uint64) {
		b = append(b, ' ')
		b = append(b, name...)
		b = strconv.AppendUint(b, v, 10)
	}
	switch e.Kind {
	case EffectDeliver, EffectGetResult:
		num("c", uint64(e.Consumer))
		num("m", e.Index)
		if e.Redelivered {
			b = append(b, " redelivered"...)
		}
		if e.DeliveryCount > 0 {
			num("delivery-count=", uint64(e.DeliveryCount))
		}
		if e.AcquiredCount > 0 {
			num("acquired-count=", uint64(e.AcquiredCount))
		}
		if e.Kind == EffectGetResult {
			num("remaining=", uint64(e.Count))
		}
	case EffectConfirm, EffectReject:
		num("p", e.Publisher)
		num("seq=", e.Seq)
	case EffectOutOfSequence:
		num("p", e.Publisher)
		num("seq=", e.Seq)
		num("expected=", e.Index)
	case EffectDeadLetter, EffectDrop:
		num("m", e.Index)
		b = append(b, ' ')
		b = append(b, e.Reason.String()...)
		if e.AtLeastOnce {
			b = append(b, " at-least-once"...)
		}
		if e.DeliveryCount > 0 {
			num("delivery-count=", uint64(e.DeliveryCount))
		}
		if e.AcquiredCount > 0 {
			num("acquired-count=", uint64(e.AcquiredCount))
		}
		b = append(b, " time="...)
		b = strconv.AppendInt(b, e.Time, 10)
	case EffectCancelConsumer, EffectConsumerRefused:
		num("c", uint64(e.Consumer))
		b = append(b, ' ')
		b = append(b, e.Reason.String()...)
	case EffectActive:
		num("c", uint64(e.Consumer))
		b = append(b, ' ')
		b = strconv.AppendBool(b, e.Active)
	case EffectGetEmpty:
		num("c", uint64(e.Consumer))
	case EffectPurged:
		num("count=", uint64(e.Count))
	}
	return string(b)
}
