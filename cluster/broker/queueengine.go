package broker

import (
	"context"
	"slices"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/raftq"
	"github.com/warrenmq/warren/raftq/classic"
	"github.com/warrenmq/warren/raftq/queue"
	"github.com/warrenmq/warren/raftq/replica"
)

// Starting a queue: the engine behind it, from its effective arguments.

// addQueue creates the queue's engine, from its effective arguments, and
// registers it. v.mu is held.
func (qt *queueTable) addQueue(rec catalog.Queue, args wire.Table) (*Queue, error) {
	q := &Queue{vhost: qt.v, rec: rec, args: args, bindings: make(map[*binding]*exchange)}
	pol, op := qt.v.queuePoliciesLocked(rec.Name, rec.Type)
	q.setPolicyState(pol, op, qt.v.runnableArgs(q, effectiveArgs(rec.Type, args, pol, op)))
	if pol != nil || op != nil {
		// The leader hands the effective arguments to the queue through
		// its log once, so that every replica runs with them.
		q.pushedVer = q.effVer - 1
	} else {
		q.pushedVer = q.effVer
	}
	if rec.Exclusive && qt.v.b.remote(rec) {
		q.owner = remoteOwner
	}
	engine, err := qt.newEngine(q)
	if err != nil && (pol != nil || op != nil) {
		// The policies make arguments the queue's rules refuse: run
		// with the declared ones.
		qt.v.b.log.Warn("queue's policies give arguments it refuses; using its own", "vhost", qt.v.name, "queue", rec.Name, "err", err)
		q.eff, q.pushedVer = args, q.effVer
		q.dlx.Store(deadLetterTargetOf(args))
		engine, err = qt.newEngine(q)
	}
	if err != nil {
		qt.v.b.log.Error("cannot start queue", "vhost", qt.v.name, "queue", rec.Name, "type", rec.Type, "err", err)
		return nil, wire.Errorf(wire.InternalError, "cannot start %s: %v", q.describe(), err)
	}
	q.engine = engine
	qt.queues[rec.Name] = q
	qt.v.b.served.add(q)
	return q, nil
}

// newEngine picks the queue type's implementation: a Raft group of its own
// for a quorum queue, memory for a classic one.
func (qt *queueTable) newEngine(q *Queue) (queue.Queue, error) {
	if qt.v.b.remote(q.rec) {
		return qt.v.b.cfg.Cluster.OpenRemote(q.rec, qt.v.name+"/"+q.rec.Name)
	}
	// A durable classic queue keeps its messages across restarts in a
	// one-member Raft group's log, under classic rules.
	durableClassic := q.rec.Type == QueueTypeClassic && isReplicated(q.rec, q.owner)
	if isReplicated(q.rec, q.owner) {
		cfg := qt.v.b.cfg.Replica
		cfg.Classic = durableClassic
		cfg.Name = qt.v.name + "/" + q.rec.Name
		cfg.Dir = qt.v.b.queueDir(q.rec)
		cfg.NodeID = qt.v.b.cfg.NodeID
		cfg.Arguments = q.eff
		cfg.Created = q.rec.Created
		cfg.OnExpired = func() { qt.expire(q) }
		cfg.Log = qt.v.b.log
		// Installed whatever the arguments say: a policy may name a
		// dead-letter exchange later. The queue's machine decides what
		// is dead-lettered; the target is read when it is.
		cfg.DeadLetter = qt.deadLetterFunc(q)
		cfg.DisconnectedTimeout = func() time.Duration {
			return replica.DisconnectedTimeoutOf(q.EffectiveArguments(), qt.v.b.cfg.ConsumerDisconnectedTimeout)
		}
		if qt.v.b.cfg.Cluster != nil {
			// A member on a drained node stays out of elections from
			// the start (warrenctl drain).
			cfg.Drained = qt.v.b.Draining(qt.v.b.cfg.NodeID)
			return qt.v.b.cfg.Cluster.OpenQueue(q.rec, cfg)
		}
		return replica.Open(cfg)
	}
	// A classic queue runs the quorum queue's machine in memory
	// (raftq/classic): the same TTL, length-limit and dead-letter rules.
	cfg := classic.Config{
		Name:       qt.v.name + "/" + q.rec.Name,
		Arguments:  q.eff,
		DeadLetter: qt.deadLetterFunc(q),
		Created:    q.rec.Created,
		Budget:     qt.v.b.memory,
		OnExpired:  func() { qt.expire(q) },
		Log:        qt.v.b.log,
	}
	if q.rec.AutoDelete {
		cfg.OnUnused = func() { qt.autoDelete(q) }
	}
	return classic.New(cfg)
}

// deadLetterFunc publishes q's dead letters to the target its effective
// arguments name at the time.
func (qt *queueTable) deadLetterFunc(q *Queue) func(ctx context.Context, m *queue.Message, reason raftq.Reason, at int64, done func(error)) {
	return func(ctx context.Context, m *queue.Message, reason raftq.Reason, at int64, done func(error)) {
		dlx := q.dlx.Load()
		if dlx == nil {
			done(errNoDeadLetterExchange)
			return
		}
		qt.v.deadLetter(ctx, q, *dlx, m, reason, at, done)
	}
}

func (qt *queueTable) restoreQueue(rec catalog.Queue) error {
	if !isReplicated(rec, 0) && len(rec.Members) > 0 && !slices.Contains(rec.Members, qt.v.b.cfg.NodeID) && !qt.v.b.remote(rec) {
		// Another node's in-memory queue that this one cannot reach: a
		// standalone node's data, or a record from before such queues
		// had IDs to be reached by.
		return nil
	}
	if qt.v.b.ownTransient(rec) {
		// This node's transient queues exist only as declared here: a
		// record of one from an earlier start is stale (dropStale
		// removes it), and one of this start is already in the model.
		return nil
	}
	args, err := decodeTable(rec.Arguments)
	if err != nil {
		return err
	}
	qt.v.mu.Lock()
	defer qt.v.mu.Unlock()
	_, err = qt.addQueue(rec, args)
	return err
}
