package replica

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/queue"
	"github.com/warrenmq/warren/raftq"
)

// execute carries out one effect on the leader. It runs on raft's FSM
// goroutine with fsm.mu held, so it must not block: deliveries only queue
// frames on the consumer's connection.
func (r *Replica) execute(e raftq.Effect) {
	switch e.Kind {
	case raftq.EffectDeliver:
		r.deliver(e)
	case raftq.EffectCancelConsumer:
		// Consumer timeout: the timed-out messages are back in the queue
		// and the machine detached the consumer; the channel tells the
		// client (basic.cancel, or a 406 channel error). A basic.get
		// delivery that timed out has no consumer to tell: the getter is
		// shared by every channel, so its message just returns.
		r.mu.Lock()
		ref := r.consumers[e.Consumer]
		if ref != nil {
			delete(r.consumers, e.Consumer)
			delete(r.byHandle, ref.c)
		}
		r.mu.Unlock()
		if ref != nil {
			go ref.c.TimedOut(ref.timeout)
		}
	case raftq.EffectDeleteQueue:
		if r.cfg.OnExpired != nil {
			go r.cfg.OnExpired()
		}
	case raftq.EffectDeadLetter:
		r.dl.effect(e)
	}
}

func (r *Replica) deliver(e raftq.Effect) {
	r.mu.Lock()
	ref := r.consumers[e.Consumer]
	var id uint64
	if ref != nil {
		if ref.noAck {
			r.autoSettle[e.Consumer] = append(r.autoSettle[e.Consumer], e.Index)
		} else {
			r.nextDelivery++
			id = r.nextDelivery
			r.handedOut[id] = handout{index: e.Index, consumer: e.Consumer}
		}
	}
	r.mu.Unlock()
	if ref == nil {
		return // the consumer's channel is going; ConsumerDown follows
	}
	msg, err := r.readMessage(e.Index)
	if err != nil {
		r.log.Error("read message for delivery", "index", e.Index, "err", err)
		return
	}
	ref.c.Deliver(queue.Delivery{ID: id, Message: withCounts(msg, e), Redelivered: e.Redelivered})
	if ref.noAck {
		select {
		case r.settleWake <- struct{}{}:
		default:
		}
	}
}

// readMessage reads a message's body and properties back from its
// enqueue entry in the log.
func (r *Replica) readMessage(index uint64) (*queue.Message, error) {
	var l raft.Log
	if err := r.store.GetLog(index, &l); err != nil {
		return nil, fmt.Errorf("log entry %d: %w", index, err)
	}
	var cmd raftq.Command
	if err := raftq.Decode(l.Data, &cmd); err != nil {
		return nil, fmt.Errorf("log entry %d: %w", index, err)
	}
	if cmd.Op != raftq.OpEnqueue {
		return nil, fmt.Errorf("log entry %d is %v, not an enqueue", index, cmd.Op)
	}
	return decodeMessage(cmd.Payload)
}

// withCounts adds RabbitMQ 4.x's x-delivery-count and x-acquired-count
// headers to a message handed out before.
func withCounts(m *queue.Message, e raftq.Effect) *queue.Message {
	if e.DeliveryCount == 0 && e.AcquiredCount == 0 {
		return m
	}
	h := make(amqp.Table, len(m.Properties.Headers)+2)
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

// settler settles no-ack deliveries in batches: the machine counted them
// against the consumer's credit when it handed them out.
func (r *Replica) settler() {
	defer r.wg.Done()
	for {
		select {
		case <-r.settleWake:
		case <-r.done:
			return
		}
		r.mu.Lock()
		batch := r.autoSettle
		r.autoSettle = make(map[raftq.ConsumerID][]uint64, len(batch))
		r.mu.Unlock()
		for c, ids := range batch {
			r.propose(&raftq.Command{Op: raftq.OpSettle, Consumer: c, IDs: ids})
		}
	}
}

// tickInterval is how often the leader looks at the machine's next
// deadline. Proposing happens only when one is due: an idle queue writes
// nothing to its log.
const tickInterval = 100 * time.Millisecond

func (r *Replica) ticker() {
	defer r.wg.Done()
	t := time.NewTicker(tickInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-r.done:
			return
		}
		if !r.isLeader() {
			continue
		}
		r.fsm.mu.Lock()
		at, ok := r.fsm.m.NextDeadline()
		r.fsm.mu.Unlock()
		if ok && at <= time.Now().UnixMilli() {
			r.propose(&raftq.Command{Op: raftq.OpTick}).Error()
		}
	}
}
