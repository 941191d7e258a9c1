package forward

import (
	"context"
	"testing"

	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/proto/queuepb"
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
