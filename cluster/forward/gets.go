package forward

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/replica"
)

// getSettler carries the settlements of the messages this node's channels
// took with basic.get from a leader on another node. Each such get is
// checked out to a getter ID of its own (replica/gets.go), and each
// settlement is sent, again and again, until a leader has committed it:
// unlike a consumer's, nothing else would return a get's message whose
// ack or requeue was lost on the way (a consumer's channel, or its
// stream's end, gives back what it holds; a getter has neither), and it
// would stay checked out to nobody until its consumer timeout.
type getSettler struct {
	mu      sync.Mutex
	held    map[uint64]uint64 // getter of each delivery the node's channels hold
	pending []replica.GetSettlement
	wake    chan struct{}
	started atomic.Bool
}

const (
	// getRetryMin and getRetryMax bound the wait before settlements of
	// gets are sent again after no leader took them.
	getRetryMin = 250 * time.Millisecond
	getRetryMax = 5 * time.Second
)

func (g *getSettler) init() {
	g.held = make(map[uint64]uint64)
	g.wake = make(chan struct{}, 1)
}

// noteGet records that a channel of this node holds delivery, checked out
// to getter.
func (r *Router) noteGet(delivery, getter uint64) {
	r.gets.mu.Lock()
	r.gets.held[delivery] = getter
	r.gets.mu.Unlock()
}

// releaseGetter returns whatever getter holds: its get's answer was lost.
func (r *Router) releaseGetter(getter uint64) {
	r.queueGetSettlements([]replica.GetSettlement{{Getter: raftq.ConsumerID(getter)}})
}

// settleGets takes the deliveries of forwarded gets out of ids, queues
// their settlements with op and cause, and returns the rest (ids itself
// when there were none).
func (r *Router) settleGets(op raftq.Op, cause queue.ReturnCause, ids []uint64) []uint64 {
	g := &r.gets
	g.mu.Lock()
	if len(g.held) == 0 {
		g.mu.Unlock()
		return ids
	}
	var list []replica.GetSettlement
	var rest []uint64
	for i, id := range ids {
		getter, ok := g.held[id]
		if !ok {
			if list != nil {
				rest = append(rest, id)
			}
			continue
		}
		if list == nil {
			rest = append(rest, ids[:i]...) // a copy: ids is the caller's
		}
		delete(g.held, id)
		list = append(list, replica.GetSettlement{Op: op, Cause: cause, Getter: raftq.ConsumerID(getter), Delivery: id})
	}
	g.mu.Unlock()
	if list == nil {
		return ids
	}
	r.queueGetSettlements(list)
	return rest
}

func (r *Router) queueGetSettlements(list []replica.GetSettlement) {
	g := &r.gets
	g.mu.Lock()
	g.pending = append(g.pending, list...)
	g.mu.Unlock()
	r.startOnce(&g.started, r.runGetSettler)
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// runGetSettler sends the queued settlements of gets to the leader until
// one commits them, backing off while none does, until the router closes.
// A node that stops with some unsent leaves them to the leader, which
// returns a gone node's getters' messages (Replica.NodeGone).
func (r *Router) runGetSettler() {
	defer r.wg.Done()
	g := &r.gets
	var retry time.Duration
	for {
		if retry == 0 {
			select {
			case <-g.wake:
			case <-r.ctx.Done():
				return
			}
		} else if r.sleep(r.ctx, retry) != nil {
			return
		}
		g.mu.Lock()
		batch := g.pending
		g.pending = nil
		g.mu.Unlock()
		if len(batch) == 0 {
			retry = 0
			continue
		}
		err := r.sendGetSettlements(batch)
		if err == nil || errors.Is(err, queue.ErrDeleted) {
			retry = 0
			continue
		}
		r.log.Debug("forward: settlements of gets not taken yet; sending them again", "count", len(batch), "err", err)
		g.mu.Lock()
		g.pending = append(batch, g.pending...)
		g.mu.Unlock()
		retry = min(max(2*retry, getRetryMin), getRetryMax)
	}
}

func (r *Router) sendGetSettlements(list []replica.GetSettlement) error {
	ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
	defer cancel()
	return r.onLeader(ctx, func(l Local) error {
		return l.SettleGets(list)
	}, func(ctx context.Context, c queuepb.ForwardClient, _ string) error {
		_, err := c.Settle(ctx, &queuepb.SettleRequest{QueueId: r.cfg.QueueID, Getters: encodeGetSettlements(list)})
		return err
	})
}
