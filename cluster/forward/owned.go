package forward

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// ownedSettler carries the settlements this node makes by the ID of the
// holder (replica/owned.go): of the messages its channels took with
// basic.get, each checked out to a getter ID of its own, and the release
// of a closed channel's consumers. Each is
// sent, again and again, until a leader has committed it: unlike a live
// consumer's, nothing else would return a message whose settlement was
// lost on the way (a getter has no stream whose end gives back what it
// holds, and a cancelled consumer keeps what it holds for a channel that
// is gone), and it would stay checked out to nobody until its consumer
// timeout.
type ownedSettler struct {
	r *Router // its leader, config and lifetime

	mu   sync.Mutex
	held map[uint64]uint64 // getter of each delivery the node's channels hold
	// nheld is len(held), read without the lock: every settlement of the
	// node passes settleGets, and most queues are read by consumers only.
	nheld   atomic.Int32
	pending []replica.OwnedSettlement
	wake    chan struct{}
	started atomic.Bool
	// queued counts the settlements queued so far and taken those a
	// leader has taken, in order; taking is closed (and replaced) when
	// taken grows (await). Under mu.
	queued, taken uint64
	taking        chan struct{}
}

const (
	// settleRetryMin and settleRetryMax bound the wait before settlements
	// are sent again after no leader took them.
	settleRetryMin = 250 * time.Millisecond
	settleRetryMax = 5 * time.Second
)

func (g *ownedSettler) init(r *Router) {
	g.r = r
	g.held = make(map[uint64]uint64)
	g.wake = make(chan struct{}, 1)
	g.taking = make(chan struct{})
}

// await returns once a leader has taken every settlement queued
// before the call, or when ctx ends. A channel's basic.get waits for it:
// a get's nack then a get on the same channel must find the message back
// in the queue, as RabbitMQ's channel orders them, and the settlement
// travels on its own.
func (g *ownedSettler) await(ctx context.Context) {
	g.mu.Lock()
	target := g.queued
	for g.taken < target {
		ch := g.taking
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
		g.mu.Lock()
	}
	g.mu.Unlock()
}

// noteGet records that a channel of this node holds delivery, checked out
// to getter.
func (g *ownedSettler) noteGet(delivery, getter uint64) {
	g.mu.Lock()
	g.held[delivery] = getter
	g.nheld.Store(int32(len(g.held)))
	g.mu.Unlock()
}

// release returns whatever owner holds: a getter whose get's answer
// was lost, or a consumer whose channel closed.
func (g *ownedSettler) release(owner uint64) {
	g.queue([]replica.OwnedSettlement{{Owner: raftq.ConsumerID(owner)}})
}

// settleGets takes the deliveries of basic.gets out of ids, queues
// their settlements with op and cause, and returns the rest (ids itself
// when there were none).
func (g *ownedSettler) settleGets(op raftq.Op, cause queue.ReturnCause, ids []uint64) []uint64 {
	if g.nheld.Load() == 0 {
		return ids
	}
	g.mu.Lock()
	var list []replica.OwnedSettlement
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
		g.nheld.Store(int32(len(g.held)))
		list = append(list, replica.OwnedSettlement{Op: op, Cause: cause, Owner: raftq.ConsumerID(getter), Delivery: id})
	}
	g.mu.Unlock()
	if list == nil {
		return ids
	}
	g.queue(list)
	return rest
}

// queue adds list to what is sent to the leader, and wakes run.
func (g *ownedSettler) queue(list []replica.OwnedSettlement) {
	g.mu.Lock()
	g.pending = append(g.pending, list...)
	g.queued += uint64(len(list))
	g.mu.Unlock()
	g.r.startOnce(&g.started, g.run)
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// run sends the queued owned settlements to the leader until
// one commits them, backing off while none does, until the router closes.
// A node that stops with some unsent leaves them to the leader, which
// returns what a gone node's getters and cancelled consumers hold
// (Replica.NodeGone).
func (g *ownedSettler) run() {
	r := g.r
	defer r.wg.Done()
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
		err := g.send(batch)
		if err == nil || errors.Is(err, queue.ErrDeleted) {
			g.mu.Lock()
			g.taken += uint64(len(batch))
			close(g.taking)
			g.taking = make(chan struct{})
			g.mu.Unlock()
			retry = 0
			continue
		}
		r.log.Debug("forward: owned settlements not taken yet; sending them again", "count", len(batch), "err", err)
		g.mu.Lock()
		g.pending = append(batch, g.pending...)
		g.mu.Unlock()
		retry = min(max(2*retry, settleRetryMin), settleRetryMax)
	}
}

// send has the leader commit list, trying for up to opTimeout.
func (g *ownedSettler) send(list []replica.OwnedSettlement) error {
	r := g.r
	ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
	defer cancel()
	return r.leaders.onLeader(ctx, func(l Local) error {
		return l.SettleOwned(list)
	}, func(ctx context.Context, c queuepb.ForwardClient, _ string) error {
		_, err := c.Settle(ctx, &queuepb.SettleRequest{QueueId: r.cfg.QueueID, Owned: encodeOwned(list)})
		return err
	})
}
