package forward

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/proto/queuepb"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// settlements carries a router's settlements by delivery ID (basic.ack,
// nack, reject of consumers' deliveries) to where the latest delivery came
// from: this node's member, or a remote member through the consume stream
// that carried it, or failing that one unary Settle call per node per
// batch (run). What a node does not take goes to whichever member leads
// (atLeader). Settlements by holder (basic.gets, released consumers)
// are the ownedSettler's (owned.go).
type settlements struct {
	r *Router // its member, leader, config and lifetime

	// source is where the latest delivery came from: the leader, as far
	// as this node can tell without asking. Settlements go there; a
	// delivery's ID means the same to every member (the machine numbers
	// its handings-out), so the leader settles what its predecessors
	// handed out, and a member that no longer leads passes them on
	// (replica/former.go). Replaced, never changed, so read without a lock.
	source atomic.Pointer[origin]

	mu    sync.Mutex
	unary map[string][]*queuepb.Settlement // by node address, for run
	wake  chan struct{}
	// started: run's goroutine is started on first use (Router.startOnce).
	started atomic.Bool
}

// origin is where deliveries came from.
type origin struct {
	local bool
	addr  string
	// stream is a live consume stream to that member, which carries
	// settlements; nil sends them with the unary Settle.
	stream atomic.Pointer[attachment]
}

func (s *settlements) init(r *Router) {
	s.r = r
	s.unary = make(map[string][]*queuepb.Settlement)
	s.wake = make(chan struct{}, 1)
}

// Settle acknowledges deliveries at the leader, as far as this node knows
// it (where the latest delivery came from).
func (r *Router) Settle(ids []uint64) { r.settles.send(queuepb.SettleOp_SETTLE, 0, ids) }

// Requeue returns deliveries to the queue.
func (r *Router) Requeue(ids []uint64, cause queue.ReturnCause) {
	r.settles.send(queuepb.SettleOp_REQUEUE, cause, ids)
}

// Discard drops (dead-letters) deliveries.
func (r *Router) Discard(ids []uint64, cause queue.ReturnCause) {
	r.settles.send(queuepb.SettleOp_DISCARD, cause, ids)
}

// SettleHeld passes settlements that this node's member named by consumer
// and message, as a former leader (replica/former.go), to the leader. It
// returns at once; they are sent until a leader takes them
// (settlements.later).
func (r *Router) SettleHeld(list []replica.HeldSettlement) {
	if len(list) == 0 {
		return
	}
	r.settles.later(func(l Local) error {
		return l.SettleHeld(list)
	}, func(ctx context.Context, c queuepb.ForwardClient, _ string) error {
		_, err := c.Settle(ctx, &queuepb.SettleRequest{QueueId: r.cfg.QueueID, Held: encodeHeld(list)})
		return err
	}, func(err error) {
		r.log.Debug("forward: a former leader's settlements dropped", "err", err)
	})
}

// SettleDeliveriesAtLeader passes settlements, by delivery ID, that this
// node's member could not resolve (it has not applied the entries that
// handed them out) on to the leader. It returns at once; they are sent
// until a leader takes them (settlements.later).
func (r *Router) SettleDeliveriesAtLeader(op raftq.Op, cause queue.ReturnCause, deliveries []uint64) {
	if len(deliveries) == 0 {
		return
	}
	list := []*queuepb.Settlement{{Op: opWire(op), Cause: uint32(cause), Ids: append([]uint64(nil), deliveries...)}}
	r.settles.atLeader("", list, nil)
}

// noteOrigin records where a delivery came from; a is the remote stream
// that carried it, if any. It is called per delivery, so the usual case
// (the same source) takes no lock and allocates nothing.
func (s *settlements) noteOrigin(local bool, addr string, a *attachment) {
	if o := s.source.Load(); o != nil && o.local == local && o.addr == addr {
		if a != nil && o.stream.Load() != a {
			o.stream.Store(a)
		}
		return
	}
	o := &origin{local: local, addr: addr}
	if a != nil {
		o.stream.Store(a)
	}
	s.source.Store(o)
}

// attachmentEnded stops settlements going through a's stream.
func (s *settlements) attachmentEnded(a *attachment) {
	if o := s.source.Load(); o != nil {
		o.stream.CompareAndSwap(a, nil)
	}
}

// send settles ids with op and cause where the latest delivery came
// from, less those of basic.gets, which go by holder.
func (s *settlements) send(op queuepb.SettleOp, cause queue.ReturnCause, ids []uint64) {
	ids = s.r.owned.settleGets(opOf(op), cause, ids)
	o := s.source.Load()
	if o == nil || len(ids) == 0 {
		return // nothing was delivered through this node
	}
	if o.local {
		if l := s.r.leaders.member(); l != nil {
			settleOn(l, &queuepb.Settlement{Op: op, Cause: uint32(cause), Ids: ids})
		}
		return
	}
	ids = append([]uint64(nil), ids...)
	if a := o.stream.Load(); a != nil && a.settle(op, cause, ids) {
		return
	}
	s.sendUnary(o.addr, []*queuepb.Settlement{{Op: op, Cause: uint32(cause), Ids: ids}})
}

// later runs onLeader on a goroutine of the router's wait group, again
// and again (each try for up to opTimeout) until it succeeds, and failed
// with its error once it cannot any more: the queue is gone or the router
// is closing. Nothing once the router is stopping. Settlements are
// idempotent (a message its holder no longer holds is left alone), so a
// late one is harmless, while a dropped one leaves a message checked out
// to a consumer that believes it settled it, using up its prefetch.
func (s *settlements) later(local func(Local) error, remote func(context.Context, queuepb.ForwardClient, string) error, failed func(error)) {
	r := s.r
	r.spawn(func() {
		retry := settleRetryMin
		for {
			ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
			err := r.leaders.onLeader(ctx, local, remote)
			cancel()
			if err == nil {
				return
			}
			if errors.Is(err, queue.ErrDeleted) || r.sleep(r.ctx, retry) != nil {
				failed(err)
				return
			}
			r.log.Debug("forward: settlements not taken yet; sending them again", "err", err)
			retry = min(2*retry, settleRetryMax)
		}
	})
}

// sendUnary hands settlements to run's goroutine.
func (s *settlements) sendUnary(addr string, list []*queuepb.Settlement) {
	if len(list) == 0 {
		return
	}
	s.mu.Lock()
	for _, st := range list {
		s.unary[addr] = appendSettlement(s.unary[addr], st.Op, queue.ReturnCause(st.Cause), st.Ids)
	}
	s.mu.Unlock()
	s.r.startOnce(&s.started, s.run)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// appendSettlement adds ids to list, merging with its last settlement
// when op and cause match.
func appendSettlement(list []*queuepb.Settlement, op queuepb.SettleOp, cause queue.ReturnCause, ids []uint64) []*queuepb.Settlement {
	if n := len(list); n > 0 && list[n-1].Op == op && list[n-1].Cause == uint32(cause) {
		list[n-1].Ids = append(list[n-1].Ids, ids...)
		return list
	}
	return append(list, &queuepb.Settlement{Op: op, Cause: uint32(cause), Ids: ids})
}

// run sends settlements that no live consume stream carries, one unary
// call per node per batch.
func (s *settlements) run() {
	r := s.r
	defer r.wg.Done()
	for {
		select {
		case <-s.wake:
		case <-r.ctx.Done():
			return
		}
		s.mu.Lock()
		batch := s.unary
		s.unary = make(map[string][]*queuepb.Settlement)
		s.mu.Unlock()
		for addr, list := range batch {
			c, err := r.leaders.client(addr)
			if err == nil {
				ctx, cancel := context.WithTimeout(r.ctx, rpcTimeout)
				_, err = c.Settle(ctx, &queuepb.SettleRequest{QueueId: r.cfg.QueueID, Settlements: list})
				cancel()
			}
			if err != nil {
				s.atLeader(addr, list, err)
			}
		}
	}
}

// atLeader sends settlements that addr did not take (its node is gone,
// say) to the leader, which knows every delivery's ID. It returns at
// once; they are sent until a leader takes them (later).
func (s *settlements) atLeader(addr string, list []*queuepb.Settlement, cause error) {
	r := s.r
	s.later(func(l Local) error {
		for _, st := range list {
			settleOn(l, st)
		}
		return nil
	}, func(ctx context.Context, c queuepb.ForwardClient, _ string) error {
		_, err := c.Settle(ctx, &queuepb.SettleRequest{QueueId: r.cfg.QueueID, Settlements: list})
		return err
	}, func(err error) {
		r.log.Debug("forward: settlements dropped", "addr", addr, "cause", cause, "err", err)
	})
}
