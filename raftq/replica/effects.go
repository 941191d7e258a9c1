package replica

import (
	"fmt"
	"slices"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// The machine's effects, one handler per kind (effectHandlers): what each
// does and on which members. Every handler runs on raft's FSM goroutine
// with fsm.mu held, once per effect of each applied entry, so none may
// block: a delivery only queues frames on the consumer's connection, and
// what may block (dead letters, a consumer timeout's or an expiry's
// callback) goes to a goroutine.
//
// Who carries an effect out differs by kind. Publish answers and a
// proposer's answer are for whichever member holds the waiting publisher
// or proposer (every member looks). Deliveries, consumer timeouts, an
// expiry and drops are the leader's, whichever leader's entry it is. A
// dead letter is sent only by the leader that appended its entry
// (at-most-once), or by any leader if it is at-least-once.

// entryContext is what the effect handlers know of the entry whose
// effects they carry out.
type entryContext struct {
	index uint64
	op    raftq.Op
	// leader: this member leads. current: it appended the entry, as
	// leader in this term; an entry of an earlier term was another
	// leader's, which carried out its effects (or failed first).
	leader, current bool
	// answer collects the effects the entry's proposer waits for.
	answer *result
}

type effectHandler func(f *fsm, x *entryContext, e raftq.Effect)

// effectHandlers maps each effect kind to its handler. A kind without
// one (EffectActive, which the runtime need not act on) is ignored.
var effectHandlers = [...]effectHandler{
	raftq.EffectConfirm:         answerPublish,
	raftq.EffectReject:          answerPublish,
	raftq.EffectOutOfSequence:   answerPublish,
	raftq.EffectGetResult:       answerProposer,
	raftq.EffectGetEmpty:        answerProposer,
	raftq.EffectConsumerRefused: answerProposer,
	raftq.EffectPurged:          answerProposer,
	raftq.EffectDeadLetter:      deadLetterEffect,
	raftq.EffectDeliver:         onLeader(func(r *Replica, e raftq.Effect) { r.consumers.deliver(e) }),
	raftq.EffectCancelConsumer:  onLeader(func(r *Replica, e raftq.Effect) { r.consumers.timedOut(e) }),
	raftq.EffectDeleteQueue:     onLeader(func(r *Replica, _ raftq.Effect) { r.expire() }),
	// An at-least-once dead letter may be among them: a new
	// configuration ended at-least-once dead-lettering, and the machine
	// deleted it (raftq's updateConfig).
	raftq.EffectDrop: onLeader(func(r *Replica, e raftq.Effect) { r.dl.forget(e.Index) }),
}

// dispatchEffect carries out one effect of the entry x.
func dispatchEffect(f *fsm, x *entryContext, e raftq.Effect) {
	if int(e.Kind) < len(effectHandlers) {
		if h := effectHandlers[e.Kind]; h != nil {
			h(f, x, e)
		}
	}
}

// onLeader makes a handler that runs only on the leader.
func onLeader(run func(r *Replica, e raftq.Effect)) effectHandler {
	return func(f *fsm, x *entryContext, e raftq.Effect) {
		if x.leader {
			run(f.r, e)
		}
	}
}

// answerPublish answers a publish: publishes proposed through this member
// wait in its pending map (its own and forwarded ones); others are not
// found.
func answerPublish(f *fsm, x *entryContext, e raftq.Effect) {
	var err error
	switch e.Kind {
	case raftq.EffectReject:
		err = queue.ErrRejected
	case raftq.EffectOutOfSequence:
		err = ErrOutOfSequence
	}
	f.r.pub.completeEnqueue(e.Publisher, e.Seq, err)
	if e.Kind == raftq.EffectReject && f.dlxOnReject && x.current && x.op == raftq.OpEnqueue {
		// x-overflow=reject-publish-dlx (classic queues): the refused
		// message is dead-lettered too, from its entry.
		f.r.dl.effect(raftq.Effect{Kind: raftq.EffectDeadLetter, Index: x.index, Reason: raftq.ReasonMaxLen, Time: f.m.Clock()})
	}
}

// answerProposer keeps an effect the entry's proposer waits for
// (basic.get, basic.consume, queue.purge) for the entry's response.
func answerProposer(_ *fsm, x *entryContext, e raftq.Effect) {
	if x.answer == nil {
		x.answer = &result{}
	}
	x.answer.effects = append(x.answer.effects, e)
}

// deadLetterEffect sends a dead letter at most once: publishing an
// earlier leader's again would duplicate it, and losing it if that leader
// failed first is what at-most-once allows. An at-least-once one stays
// pending in the machine until settled, so sending it again is harmless.
func deadLetterEffect(f *fsm, x *entryContext, e raftq.Effect) {
	if x.current || (x.leader && e.AtLeastOnce) {
		f.r.dl.effect(e)
	}
}

// decodeEntryMessage decodes the message an enqueue entry carries.
func decodeEntryMessage(data []byte) (*queue.Message, error) {
	var cmd raftq.Command
	if err := raftq.Decode(data, &cmd); err != nil {
		return nil, err
	}
	if cmd.Op != raftq.OpEnqueue {
		return nil, fmt.Errorf("entry is %v, not an enqueue", cmd.Op)
	}
	return decodeMessage(cmd.Payload)
}

// withCounts adds RabbitMQ 4.x's x-delivery-count and x-acquired-count
// headers to a message handed out before.
func withCounts(m *queue.Message, e raftq.Effect) *queue.Message {
	if e.DeliveryCount == 0 && e.AcquiredCount == 0 {
		return m
	}
	h := make(wire.Table, len(m.Properties.Headers)+2)
	for k, v := range m.Properties.Headers {
		h[k] = v
	}
	if e.DeliveryCount > 0 {
		h["x-delivery-count"] = int64(e.DeliveryCount)
	}
	if e.AcquiredCount > 0 {
		h["x-acquired-count"] = int64(e.AcquiredCount)
	}
	m.Properties.Headers = h
	return m
}

// Settlements gather for up to SettleLinger before the settler proposes
// them. Nobody waits for a settlement's commit (an ack gets no answer), so
// this costs no latency, while a log entry per basic.ack, replicated and
// synced on every member, is what a consumer at a steady rate mostly
// costs the cluster: at 1,000 msg/s on three nodes, one entry for ten
// acks took a fifth off the CPU per message. Deliveries wait on it only
// through credit, so the settler waits no longer once a consumer has
// SettleDueAt of its acks in the batch (a prefetch of 1 to 4 is settled at
// once) or the batch holds MaxSettleBatch. A consumer's node gathers its
// acks by the same rule before it sends them to the leader
// (cluster/forward).
const (
	SettleLinger   = 10 * time.Millisecond
	MaxSettleBatch = 1024
)

// Credit is what the machine lets a consumer with opts hold unsettled.
func Credit(opts queue.ConsumeOptions) uint32 {
	if opts.Prefetch == 0 || opts.NoAck {
		return defaultCredit
	}
	return opts.Prefetch
}

// SettleDueAt is how many of a consumer's acknowledgements, gathered,
// should go at once: a quarter of its credit, which they hold back.
func SettleDueAt(credit uint32) int {
	return min(max(1, int((credit+3)/4)), MaxSettleBatch)
}

// settleDue reports whether the settlements in hand should be proposed
// now rather than wait for company: they hold back a quarter of some
// consumer's credit, settle basic.get deliveries, or are many.
func (t *consumerTable) settleDue() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := 0
	for c, ids := range t.toSettle {
		total += len(ids)
		if c == t.r.getter {
			// basic.get's: a get is a round trip through the log anyway,
			// and no cancel would flush them when the channel closes.
			return true
		}
		if ref := t.byID[c]; ref != nil && len(ids) >= SettleDueAt(ref.credit) {
			return true
		}
	}
	return total >= MaxSettleBatch
}

func sortedConsumers(m map[raftq.ConsumerID][]uint64) []raftq.ConsumerID {
	ids := make([]raftq.ConsumerID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// snapshotThreshold is the threshold for a machine holding live messages
// when it is cur now, and whether it is worth changing: not within a
// factor of two.
func snapshotThreshold(cur uint64, live int) (uint64, bool) {
	want := uint64(max(minSnapshotThreshold, 2*live))
	return want, want >= 2*cur || 2*want <= cur
}

// minSnapshotThreshold is the fewest entries between snapshots.
const minSnapshotThreshold = 16384
