package replica

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// deadLetterRetry is how often the leader sends again the at-least-once
// dead letters that could not be routed or that a target queue refused.
// (RabbitMQ's dead-letter worker retries on a timer too.)
const deadLetterRetry = time.Second

// maxDeadLetterBacklog bounds the body bytes of at-most-once dead letters
// waiting to be published. Beyond it they are dropped: at-most-once may
// lose messages, and the FSM goroutine must never wait for a slow target.
const maxDeadLetterBacklog = 64 << 20

// deadLetterer carries out EffectDeadLetter on the leader. Publishing to
// the dead-letter targets can block (a quorum target's Enqueue waits for
// room), and raft's FSM goroutine, which executes effects with fsm.mu held,
// must not; so the effects are queued here and one goroutine publishes
// them through Config.DeadLetter, in the order the machine dead-lettered
// them.
//
//   - At-most-once: the message is read from the log when the effect is
//     executed (the machine forgets it at once, so compaction may remove
//     its entry) and published once; a failure (no exchange, no route, a
//     target refusing) loses it, as in RabbitMQ.
//   - At-least-once: the machine keeps the message until
//     OpDeadLetterSettled, which is proposed once every target queue has
//     confirmed it. A message that could not be routed, or that a target
//     refused, is sent again every deadLetterRetry; a replica that becomes
//     leader sends again everything the machine still holds
//     (AppendPendingDeadLetters), after a grace in which its predecessor
//     passes on the confirms it still gets, and a replica that no longer
//     leads sends none of those it still has queued; a target may still
//     see a message twice (its confirm lost or later than the grace).
//
// Entries applied before the replica finished opening are replays of a
// log whose effects an earlier run carried out already: their dead letters
// are not executed (at-least-once ones are sent again from the machine's
// pending list when the replica starts leading).
//
// Concurrency: effect runs on the FSM goroutine with fsm.mu held; live is
// guarded by fsm.mu; the rest by mu, which is never held while calling
// out. Lock order: fsm.mu, then mu.
type deadLetterer struct {
	r      *Replica
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}

	live bool // guarded by fsm.mu

	mu sync.Mutex
	// jobs are dead letters to publish, in order.
	jobs []deadLetterJob
	// backlog is the body bytes of the at-most-once jobs.
	backlog int
	// overflowing is set while at-most-once dead letters are being
	// dropped, so that the warning is logged once per episode.
	overflowing bool
	// inflight holds the at-least-once dead letters queued, being
	// published or awaiting their targets' confirms, so that a resend
	// does not duplicate them.
	inflight map[uint64]bool
	// settled are at-least-once dead letters every target confirmed,
	// to be settled through the log.
	settled []uint64
	// failed says some at-least-once dead letter failed: the next retry
	// tick sends the pending ones again.
	failed bool
	// forgotten are at-least-once dead letters queued when the machine
	// deleted them (a configuration update ended at-least-once): their
	// jobs are skipped (RabbitMQ tears its dead-letter worker down then).
	forgotten map[uint64]bool

	startOnce, runOnce sync.Once
	// resendAt is when a new leader's resend of the pending dead letters
	// is due (unix nanoseconds): none before it (resendPendingSoon).
	resendAt atomic.Int64
}

type deadLetterJob struct {
	e   raftq.Effect
	msg *queue.Message // at-most-once: read when executed
}

func newDeadLetterer(r *Replica) *deadLetterer {
	ctx, cancel := context.WithCancel(context.Background())
	return &deadLetterer{
		r:         r,
		ctx:       ctx,
		cancel:    cancel,
		wake:      make(chan struct{}, 1),
		inflight:  make(map[uint64]bool),
		forgotten: make(map[uint64]bool),
	}
}

// start begins executing dead letters once the replica leads and has
// applied its log (onLeading then queues the at-least-once ones the
// machine still holds); later effects are carried out as they come.
func (d *deadLetterer) start() {
	d.startOnce.Do(func() {
		d.r.fsm.mu.Lock()
		d.live = true
		d.r.fsm.mu.Unlock()
	})
}

// resendGrace is how long a new leader waits before it sends again the
// at-least-once dead letters the machine holds: its predecessor may have
// sent them already, and passes on the confirms it still gets (settle).
const resendGrace = OrphanGrace

// resendPendingSoon has a new leader send again, after resendGrace, the
// at-least-once dead letters the machine holds; at once when no member
// passes confirms on (one node).
func (d *deadLetterer) resendPendingSoon() {
	if d.r.cfg.DeadLetter == nil {
		return
	}
	if d.r.cfg.SettleAtLeader == nil {
		d.resendPending()
		return
	}
	d.resendAt.Store(time.Now().Add(resendGrace).UnixNano())
	d.r.goTracked(func() {
		defer d.r.wg.Done()
		t := time.NewTimer(resendGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-d.r.done:
			return
		}
		if d.r.isLeader() {
			d.resendPending()
		}
	})
}

// resendPending queues again the at-least-once dead letters the machine
// holds that are not on their way.
func (d *deadLetterer) resendPending() {
	if d.r.cfg.DeadLetter == nil {
		return
	}
	d.r.fsm.mu.Lock()
	pending := d.r.fsm.m.AppendPendingDeadLetters(nil)
	d.r.fsm.mu.Unlock()
	d.resend(pending)
}

// effect queues a dead letter. It runs on the FSM goroutine with fsm.mu
// held, on the leader: it must not block.
func (d *deadLetterer) effect(e raftq.Effect) {
	if !d.live || d.r.cfg.DeadLetter == nil {
		return
	}
	if e.AtLeastOnce {
		d.resend([]raftq.Effect{e})
		return
	}
	m, err := d.r.storage.readMessage(e.Index)
	if err != nil {
		d.r.log.Error("read dead-lettered message", "index", e.Index, "err", err)
		return
	}
	d.mu.Lock()
	if d.backlog+len(m.Body) > maxDeadLetterBacklog {
		if !d.overflowing {
			d.r.log.Warn("dead-letter targets too slow; dropping at-most-once dead letters", "backlog_bytes", d.backlog)
		}
		d.overflowing = true
		d.mu.Unlock()
		return
	}
	d.overflowing = false
	d.backlog += len(m.Body)
	d.jobs = append(d.jobs, deadLetterJob{e: e, msg: m})
	d.mu.Unlock()
	d.signal()
}

// forget drops an at-least-once dead letter the machine no longer holds:
// if it is queued, it is not published. One being published already may
// still reach its targets; its settle then changes nothing. It runs on the
// FSM goroutine with fsm.mu held (EffectDrop), and must not block.
func (d *deadLetterer) forget(index uint64) {
	d.mu.Lock()
	if d.inflight[index] {
		delete(d.inflight, index)
		d.forgotten[index] = true
	}
	d.mu.Unlock()
}

// resend queues the at-least-once dead letters among es that are not
// already on their way.
func (d *deadLetterer) resend(es []raftq.Effect) {
	if d.r.cfg.DeadLetter == nil || len(es) == 0 {
		return
	}
	d.mu.Lock()
	for _, e := range es {
		if !d.inflight[e.Index] {
			d.inflight[e.Index] = true
			d.jobs = append(d.jobs, deadLetterJob{e: e})
		}
	}
	d.mu.Unlock()
	d.signal()
}

func (d *deadLetterer) signal() {
	// The goroutines start with the first dead letter: most queues never
	// have one, and a node may carry a thousand queues.
	d.runOnce.Do(func() {
		go d.run()
		go func() {
			<-d.r.done
			d.cancel() // frees a publish waiting for room in a target
		}()
	})
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// run publishes queued dead letters and settles confirmed ones until the
// replica stops. It is not one of the replica's waited-for goroutines:
// routing takes the vhost's lock, which the broker holds while it deletes
// (and so shuts down) a queue; the context stops a publish that waits.
func (d *deadLetterer) run() {
	t := time.NewTicker(deadLetterRetry)
	defer t.Stop()
	leader := true
	for {
		select {
		case <-d.wake:
		case <-t.C:
			wasLeader := leader
			leader = d.r.isLeader()
			// Not while a new leader waits for its predecessor's
			// confirms (resendPendingSoon, which resends after).
			held := time.Now().UnixNano() < d.resendAt.Load()
			d.mu.Lock()
			retry := d.failed && leader && !held
			if retry {
				d.failed = false
			}
			d.mu.Unlock()
			if leader && !held && (!wasLeader || retry) {
				d.r.fsm.mu.Lock()
				pending := d.r.fsm.m.AppendPendingDeadLetters(nil)
				d.r.fsm.mu.Unlock()
				d.resend(pending)
			}
		case <-d.r.done:
			return
		}
		d.drain()
	}
}

// drain publishes every queued job and settles what was confirmed.
func (d *deadLetterer) drain() {
	for {
		d.mu.Lock()
		jobs, settled := d.jobs, d.settled
		d.jobs, d.settled, d.backlog = nil, nil, 0
		d.mu.Unlock()
		if len(settled) > 0 {
			d.settle(settled)
		}
		if len(jobs) == 0 {
			return
		}
		for _, j := range jobs {
			if d.ctx.Err() != nil || d.r.stopped.Load() {
				return
			}
			d.publish(j)
		}
	}
}

func (d *deadLetterer) publish(j deadLetterJob) {
	e := j.e
	if !e.AtLeastOnce {
		d.r.cfg.DeadLetter(d.ctx, j.msg, e.Reason, e.Time, func(err error) {
			if err != nil {
				d.r.log.Debug("dead letter dropped", "index", e.Index, "reason", e.Reason.String(), "err", err)
			}
		})
		return
	}
	d.mu.Lock()
	forgotten := d.forgotten[e.Index]
	delete(d.forgotten, e.Index)
	if !forgotten && !d.r.isLeader() {
		// The leadership moved while it was queued: the new leader sends
		// again everything the machine holds, and sending it from here
		// as well would deliver it twice. Should this member lead again,
		// the retry sends it (failed).
		delete(d.inflight, e.Index)
		d.failed = true
		forgotten = true
	}
	d.mu.Unlock()
	if forgotten {
		return
	}
	m, err := d.r.storage.readMessage(e.Index)
	if err != nil {
		// Purged (and compacted away) since it was queued; or the log
		// is closing. Either way there is nothing to send.
		d.r.log.Debug("read at-least-once dead letter", "index", e.Index, "err", err)
		d.mu.Lock()
		delete(d.inflight, e.Index)
		d.mu.Unlock()
		return
	}
	d.r.cfg.DeadLetter(d.ctx, m, e.Reason, e.Time, func(err error) {
		d.mu.Lock()
		delete(d.forgotten, e.Index) // forgotten while being sent
		if err == nil {
			d.settled = append(d.settled, e.Index)
		} else {
			delete(d.inflight, e.Index)
			d.failed = true
		}
		d.mu.Unlock()
		if err == nil {
			d.signal()
		} else {
			d.r.log.Debug("at-least-once dead letter not yet delivered; will retry", "index", e.Index, "err", err)
		}
	})
}

// settle tells the machine that dead letters reached all their targets.
// They stay in flight until that is committed, so that a resend meanwhile
// does not duplicate them. A member that no longer leads passes them on to
// the leader (Config.SettleAtLeader), which holds back its own resend of
// the machine's pending dead letters for a while (resendPending) so that
// these arrive first: sent by the old leader and confirmed, they would
// otherwise be sent again.
func (d *deadLetterer) settle(ids []uint64) {
	slices.Sort(ids)
	err := d.r.wait(d.r.propose(&raftq.Command{Op: raftq.OpDeadLetterSettled, IDs: ids}))
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		d.r.settler.atLeader([]HeldSettlement{{Op: raftq.OpDeadLetterSettled, Messages: ids}})
	}
	d.mu.Lock()
	for _, i := range ids {
		delete(d.inflight, i)
	}
	if err != nil {
		d.failed = true // not settled: still pending in the machine
	}
	d.mu.Unlock()
}
