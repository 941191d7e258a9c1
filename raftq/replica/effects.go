package replica

import (
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
