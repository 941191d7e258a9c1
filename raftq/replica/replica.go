package replica

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/queue"
)

// defaultCredit stands in for "unlimited" prefetch (0) and for no-ack
// consumers: the machine needs a bound on what it hands one consumer, and
// the connection's outbound buffer needs one too.
const defaultCredit = 2000

// Replica is this node's member of one quorum queue's Raft group and the
// queue.Queue the broker uses for it. It is its core and its parts, each
// owning its fields (doc.go lists them); its own methods are the
// queue.Queue boundary and the calls that span parts.
type Replica struct {
	core

	// storage is the group's log store, snapshots and payload cache
	// (stores.go).
	storage stores

	// pub is the publish pipeline (publish.go, linger.go).
	pub publishes

	// consumers are the consumers attached through this member and
	// what they acknowledged (consumers.go).
	consumers consumerTable
	// settler proposes acknowledgements in batches, and passes the
	// settlements this member cannot carry out to where they can be
	// (settler.go).
	settler settler

	// upgrade raises the queue's machine version (version.go).
	upgrade upgrader
	// watch is the watcher of leadership and deadlines (watch.go).
	watch watcher

	// dl publishes dead letters off the FSM goroutine (deadletter.go).
	dl *deadLetterer

	// fo: prompt elections when gossip reports the leader's node failed,
	// and draining (failover.go, drain.go).
	fo failover
}

// ErrNotLeader is returned by operations that only the group's leader can
// carry out, when this member does not lead.
var ErrNotLeader = errors.New("replica: not the leader")

var _ queue.Queue = (*Replica)(nil)

func randomID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// stamped stamps the leader's time into cmd and returns its log entry.
func stamped(cmd *raftq.Command) []byte {
	cmd.Now = time.Now().UnixMilli()
	return cmd.Append(nil)
}

// errorFor maps raft's errors to the queue boundary's.
func errorFor(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrRaftShutdown):
		return queue.ErrDeleted
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return ErrNotLeader
	}
	return err
}

// Get takes one message for basic.get through the log, checked out to
// this member's own getter. A node's channels get through GetAs, with a
// getter of their own for each get (owned.go), so that a get whose answer
// is lost can be given back.
func (r *Replica) Get(noAck bool) (queue.Delivery, uint32, bool, error) {
	return r.GetAs(uint64(r.getter), noAck)
}

// GetAs takes one message for basic.get through the log, checked out to
// getter, the ID the asking node chose (owned.go).
func (r *Replica) GetAs(getter uint64, noAck bool) (queue.Delivery, uint32, bool, error) {
	if r.queueConfig().SingleActiveConsumer {
		// Refused before the log, as RabbitMQ's channel does (405).
		return queue.Delivery{}, 0, false, queue.ErrGetUnsupported
	}
	r.pub.flush()               // a get sees what was published before it
	r.consumers.attachMu.Lock() // a release of the getter waits for it (SettleOwned)
	if getter != uint64(r.getter) {
		r.consumers.foreignGets.Add(1)
		defer r.consumers.foreignGets.Add(-1)
	}
	f := r.propose(&raftq.Command{Op: raftq.OpGet, Consumer: raftq.ConsumerID(getter), NoAck: noAck})
	r.consumers.attachMu.Unlock()
	if err := errorFor(r.wait(f)); err != nil {
		return queue.Delivery{}, 0, false, err
	}
	res, _ := f.Response().(*result)
	if res == nil {
		return queue.Delivery{}, 0, false, nil
	}
	for _, e := range res.effects {
		switch e.Kind {
		case raftq.EffectGetEmpty:
			return queue.Delivery{}, 0, false, nil
		case raftq.EffectGetResult:
			msg, err := r.storage.readMessage(e.Index)
			if err != nil {
				return queue.Delivery{}, 0, false, err
			}
			return queue.Delivery{ID: e.Delivery, Message: withCounts(msg, e), Redelivered: e.Redelivered}, e.Count, true, nil
		}
	}
	return queue.Delivery{}, 0, false, nil
}

// Settle acknowledges deliveries. The settler proposes them in batches:
// acks are not confirmed to anyone, so a log entry per basic.ack would
// only cost.
func (r *Replica) Settle(ids []uint64) {
	if r.settler.asFormer(raftq.OpSettle, 0, ids) {
		return
	}
	order, groups, unknown := r.byHolder(ids)
	r.consumers.queueAcks(order, groups)
	r.settler.wakeUp()
	r.settler.unknown(raftq.OpSettle, 0, unknown)
}

// Requeue returns deliveries; the cause decides the delivery-count.
func (r *Replica) Requeue(ids []uint64, cause queue.ReturnCause) {
	if r.settler.asFormer(raftq.OpReturn, cause, ids) {
		return
	}
	order, groups, unknown := r.byHolder(ids)
	for _, c := range order {
		r.propose(&raftq.Command{Op: raftq.OpReturn, Consumer: c, IDs: groups[c], Cause: raftq.ReturnCause(cause)})
	}
	r.settler.unknown(raftq.OpReturn, cause, unknown)
}

// Discard drops (or dead-letters) rejected deliveries.
func (r *Replica) Discard(ids []uint64, cause queue.ReturnCause) {
	if r.settler.asFormer(raftq.OpDiscard, cause, ids) {
		return
	}
	order, groups, unknown := r.byHolder(ids)
	for _, c := range order {
		r.propose(&raftq.Command{Op: raftq.OpDiscard, Consumer: c, IDs: groups[c], Cause: raftq.ReturnCause(cause)})
	}
	r.settler.unknown(raftq.OpDiscard, cause, unknown)
}

// Purge removes the ready messages through the log.
func (r *Replica) Purge() (uint32, error) {
	r.pub.flush() // purged with the rest
	f := r.propose(&raftq.Command{Op: raftq.OpPurge})
	if err := errorFor(r.wait(f)); err != nil {
		return 0, err
	}
	if res, _ := f.Response().(*result); res != nil {
		for _, e := range res.effects {
			if e.Kind == raftq.EffectPurged {
				return e.Count, nil
			}
		}
	}
	return 0, nil
}

// Stats counts the queue's contents as this member has applied them.
func (r *Replica) Stats() queue.Stats {
	r.awaitApplied(statsWait)
	r.fsm.mu.Lock()
	st := r.fsm.m.Stats()
	r.fsm.mu.Unlock()
	return queue.Stats{Ready: uint32(st.Ready), Unacked: uint32(st.Unacked), Consumers: uint32(st.Consumers), DeadLettered: uint32(st.DeadLettered), Delayed: uint32(st.Delayed)}
}

// statsWait bounds how long Stats waits for a new leader to apply what
// was committed before its election: less than a forwarded call allows.
const statsWait = 1500 * time.Millisecond

// Delete stops the group and removes its files. The broker refuses
// if-unused and if-empty for quorum queues, as RabbitMQ does.
func (r *Replica) Delete(ifUnused, ifEmpty bool) (uint32, error) {
	st := r.Stats()
	if ifUnused && st.Consumers > 0 {
		return 0, queue.ErrInUse
	}
	if ifEmpty && st.Ready > 0 {
		return 0, queue.ErrNotEmpty
	}
	gone := r.consumers.handles()
	r.shutdown(queue.ErrDeleted)
	for _, c := range gone {
		c.Gone()
	}
	if r.cfg.WAL != nil {
		if err := r.cfg.WAL.DropGroup(logGroup(r.cfg)); err != nil {
			r.log.Error("drop the queue's log", "err", err)
		}
	}
	if err := os.RemoveAll(r.dir); err != nil {
		r.log.Error("remove queue files", "dir", r.dir, "err", err)
	}
	return st.Ready, nil
}

// Close stops the replica, keeping its files for the next start. Publishes
// still waiting for their commit are answered ErrNotLeader: forwarders send
// them on to the group's next leader.
func (r *Replica) Close() { r.shutdown(ErrNotLeader) }

// lingerer is a transport whose heartbeats may wait to share a call with
// other groups' (cluster/transport's Transport.StopLingering).
type lingerer interface {
	StopLingering()
}

// shutdown stops the replica and answers waiting publishes with pendingErr.
func (r *Replica) shutdown(pendingErr error) {
	r.stopErr.CompareAndSwap(nil, &pendingErr)
	if !r.stopped.CompareAndSwap(false, true) {
		return
	}
	if l, ok := r.cfg.Transport.(lingerer); ok {
		l.StopLingering() // raft.Shutdown waits for the heartbeats
	}
	if r.raft != nil {
		if err := r.raft.Shutdown().Error(); err != nil {
			r.log.Warn("raft shutdown", "err", err)
		}
	}
	r.goMu.Lock()
	r.goStopped = true // no goroutine starts after this: wg.Wait follows
	r.goMu.Unlock()
	close(r.done)
	r.wg.Wait()
	r.pub.failPending(pendingErr) // the enqueues still waiting for a confirm
	r.storage.close()
}

// Remove stops this member after the group removed it from its
// configuration, and deletes its files: the queue lives on in the other
// members. Publishes still waiting here are answered ErrNotLeader and
// consumers that can follow the leader are told LeaderLost, so that both
// go on at the leader elsewhere.
func (r *Replica) Remove() {
	consumers := r.consumers.handles()
	r.shutdown(ErrNotLeader)
	for _, c := range consumers {
		if m, ok := c.(queue.Movable); ok {
			m.LeaderLost()
		} else {
			c.Gone()
		}
	}
	if r.cfg.WAL != nil {
		if err := r.cfg.WAL.DropGroup(logGroup(r.cfg)); err != nil {
			r.log.Error("drop the removed member's log", "err", err)
		}
	}
	if err := os.RemoveAll(r.dir); err != nil {
		r.log.Error("remove the removed member's files", "dir", r.dir, "err", err)
	}
}
