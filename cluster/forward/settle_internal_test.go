package forward

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq/queue"
)

// A consume stream holds acknowledgements back until a quarter of the
// consumer's credit is in hand; anything else goes at once with them.
func TestAttachmentHoldsAcksUntilDue(t *testing.T) {
	newAttachment := func() *attachment {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		return &attachment{ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), flushAt: 4}
	}
	due := func(a *attachment) bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.dueLocked()
	}

	a := newAttachment()
	a.settle(queuepb.SettleOp_SETTLE, 0, []uint64{1, 2})
	a.settle(queuepb.SettleOp_SETTLE, 0, []uint64{3})
	if due(a) {
		t.Fatal("3 acks of a credit of 16 are due")
	}
	a.settle(queuepb.SettleOp_SETTLE, 0, []uint64{4})
	if !due(a) {
		t.Fatal("4 acks of a credit of 16 are not due")
	}
	if !a.gather() {
		t.Fatal("gather ended")
	}

	a = newAttachment()
	a.settle(queuepb.SettleOp_SETTLE, 0, []uint64{1})
	a.settle(queuepb.SettleOp_REQUEUE, queue.ReturnNack, []uint64{2})
	if !due(a) {
		t.Fatal("a requeue waits")
	}

	a = newAttachment()
	a.settle(queuepb.SettleOp_SETTLE, 0, []uint64{1})
	a.requestCancel()
	if !due(a) {
		t.Fatal("a cancel waits")
	}

	// One ack alone goes after the linger.
	a = newAttachment()
	a.settle(queuepb.SettleOp_SETTLE, 0, []uint64{1})
	<-a.wake // the sender's wake-up
	if !a.gather() {
		t.Fatal("gather ended")
	}
	a.cancel()
	if a.gather() {
		t.Fatal("gather went on after the stream ended")
	}
}

// A stream the leader ends may not have read the last settlements sent on
// it: close sends what went out within resendWindow again the unary way,
// with what had not gone out yet.
func TestAttachmentCloseResendsRecentSettlements(t *testing.T) {
	r := &Router{ctx: context.Background()}
	r.settles.init(r)
	r.settles.started.Store(true) // no settler goroutine: the test reads r.settles.unary
	ctx, cancel := context.WithCancel(context.Background())
	a := &attachment{w: &consumer{r: r}, addr: "old-leader", ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), flushAt: 100}
	a.noteSent([]*queuepb.Settlement{{Op: queuepb.SettleOp_SETTLE, Ids: []uint64{1}}})
	a.mu.Lock()
	a.sent = append([]sentSettlements{{at: time.Now().Add(-time.Second), list: []*queuepb.Settlement{{Ids: []uint64{99}}}}}, a.sent...)
	a.mu.Unlock()
	a.noteSent([]*queuepb.Settlement{{Op: queuepb.SettleOp_SETTLE, Ids: []uint64{2}}}) // drops 99: too old
	a.settle(queuepb.SettleOp_SETTLE, 0, []uint64{3})                                  // not sent yet
	a.close()
	var got []uint64
	for _, s := range r.settles.unary["old-leader"] {
		got = append(got, s.Ids...)
	}
	if !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("unary settlements after close: %v, want [1 2 3]", got)
	}
}
