package forward

import (
	"context"
	"sync"
	"time"

	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// attachment is one Consume stream; its sender goroutine carries
// settlements and the cancel to the leader.
type attachment struct {
	w      *consumer
	addr   string
	stream queuepb.Forward_ConsumeClient
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}

	mu        sync.Mutex
	out       []*queuepb.Settlement
	held      int // ids in out
	flushAt   int // held that makes out due at once (a quarter of the prefetch)
	cancelReq bool
	closed    bool
	// sent is what went on the stream lately (sender only): a stream the
	// leader ends may not have read the last of it, so close sends it again
	// the unary way. Settling twice changes nothing: a member forgets a
	// delivery's ID when it settles it.
	sent []sentSettlements
}

// sentSettlements are settlements put on the stream at a time.
type sentSettlements struct {
	at   time.Time
	list []*queuepb.Settlement
}

// resendWindow bounds how long settlements sent on a stream are kept for
// close: far longer than a message takes to cross a live stream.
const resendWindow = 250 * time.Millisecond

func (a *attachment) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Acknowledgements (SETTLE) gather for up to replica.SettleLinger before
// the sender puts them on the stream, by the rule the leader's settler
// gathers them by before it proposes them: nobody waits for them, and a
// stream message per basic.ack was a write here, a read and a wake-up on
// the leader's node. Requeues, discards and a cancel go at once, taking
// what gathered with them, and so do replica.SettleDueAt acknowledgements
// (a quarter of the consumer's credit at the leader).

// settle queues settlements for the stream; false once it cannot take
// them any more.
func (a *attachment) settle(op queuepb.SettleOp, cause queue.ReturnCause, ids []uint64) bool {
	a.mu.Lock()
	if a.closed || a.cancelReq {
		a.mu.Unlock()
		return false
	}
	first := len(a.out) == 0
	a.out = appendSettlement(a.out, op, cause, ids)
	a.held += len(ids)
	due := a.dueLocked()
	a.mu.Unlock()
	if first || due {
		a.signal()
	}
	return true
}

// dueLocked reports whether what gathered should go now; a.mu is held.
func (a *attachment) dueLocked() bool {
	if a.cancelReq || a.held >= a.flushAt {
		return true
	}
	for _, s := range a.out {
		if s.Op != queuepb.SettleOp_SETTLE {
			return true
		}
	}
	return false
}

// gather waits until what the stream holds is due or replica.SettleLinger has
// passed; false if the stream ended meanwhile.
func (a *attachment) gather() bool {
	a.mu.Lock()
	due := a.dueLocked() || len(a.out) == 0
	a.mu.Unlock()
	if due {
		return true
	}
	t := time.NewTimer(replica.SettleLinger)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-a.wake: // more came, or a cancel: due now?
			a.mu.Lock()
			due := a.dueLocked()
			a.mu.Unlock()
			if due {
				return true
			}
		case <-a.ctx.Done():
			return false
		}
	}
}

func (a *attachment) requestCancel() {
	a.mu.Lock()
	a.cancelReq = true
	a.mu.Unlock()
	a.signal()
}

// close ends the stream; settlements it did not send go the unary way.
func (a *attachment) close() {
	a.mu.Lock()
	a.closed = true
	out := a.out
	a.out, a.held = nil, 0
	sent := a.sent
	a.sent = nil
	a.mu.Unlock()
	a.cancel()
	for _, s := range sent {
		a.w.r.settles.sendUnary(a.addr, s.list)
	}
	a.w.r.settles.sendUnary(a.addr, out)
}

// noteSent keeps list, sent on the stream now, for close; older sends
// beyond resendWindow are dropped.
func (a *attachment) noteSent(list []*queuepb.Settlement) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	drop := 0
	for drop < len(a.sent) && now.Sub(a.sent[drop].at) > resendWindow {
		drop++
	}
	a.sent = append(a.sent[drop:], sentSettlements{at: now, list: list})
}

func (a *attachment) sender() {
	defer a.w.r.wg.Done()
	for {
		select {
		case <-a.wake:
		case <-a.ctx.Done():
			return
		}
		if !a.gather() {
			return
		}
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			return
		}
		out, cancel := a.out, a.cancelReq
		a.out, a.held = nil, 0
		a.mu.Unlock()
		if len(out) == 0 && !cancel {
			continue
		}
		if err := a.stream.Send(&queuepb.ConsumeRequest{Settlements: out, Cancel: cancel}); err != nil {
			a.w.r.settles.sendUnary(a.addr, out)
			return
		}
		if len(out) > 0 {
			a.noteSent(out)
		}
		if cancel {
			a.stream.CloseSend()
			return
		}
	}
}
