package broker

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/raftq/queue"
)

// queueTable is a vhost's queues by name: declaring, looking up, purging
// and deleting them, and starting the engine behind each. Its map and the
// queues' mutable fields are guarded by the vhost's lock (v.mu): routing
// reads queues along with exchanges.
type queueTable struct {
	v      *Vhost
	queues map[string]*Queue
}

// QueueDeclare is queue.declare's arguments.
type QueueDeclare struct {
	Name       string
	Passive    bool
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Arguments  wire.Table
}

// generateQueueName returns a server-chosen name like RabbitMQ's:
// "amq.gen-" and 128 random bits in URL-safe base64.
func generateQueueName() string {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		panic("read random queue name: " + err.Error())
	}
	return "amq.gen-" + base64.RawURLEncoding.EncodeToString(id[:])
}

// accessible returns q when owner may use it.
func (qt *queueTable) accessible(q *Queue, owner OwnerID) error {
	if q.owner != 0 && q.owner != owner {
		return lockedErr(q.rec.Name, qt.v.name)
	}
	return nil
}

// errDeclaredMeanwhile: another declaration of the same queue (on this
// node or another) was committed first.
var errDeclaredMeanwhile = errors.New("queue declared meanwhile")

// DeclareQueue declares (or, passively, checks) a queue. It returns the
// queue and its counts for declare-ok.
func (qt *queueTable) DeclareQueue(u *User, owner OwnerID, d QueueDeclare) (*Queue, queue.Stats, error) {
	q, st, err := qt.declareQueue(u, owner, d)
	if errors.Is(err, errDeclaredMeanwhile) {
		// The winner's record reaches this node's model shortly; then
		// this is a redeclaration, checked for equivalence as any other.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			qt.v.mu.RLock()
			_, ok := qt.queues[d.Name]
			qt.v.mu.RUnlock()
			if ok {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		q, st, err = qt.declareQueue(u, owner, d)
		if errors.Is(err, errDeclaredMeanwhile) {
			err = wire.Errorf(wire.InternalError, "%s is being declared concurrently elsewhere; declare it again", describeQueue(d.Name, qt.v.name))
		}
	}
	return q, st, err
}

// declareQueue is one attempt of DeclareQueue. A new queue is checked,
// placed (before the vhost's lock where possible: placement looks at
// every vhost's queues), recorded and started, in that order, under the
// vhost's lock; a queue that exists is checked as a redeclaration.
func (qt *queueTable) declareQueue(u *User, owner OwnerID, d QueueDeclare) (*Queue, queue.Stats, error) {
	if d.Passive {
		return qt.declarePassive(u, owner, d)
	}
	d, serverNamed, err := qt.nameDeclared(u, d)
	if err != nil {
		return nil, queue.Stats{}, err
	}
	placed := qt.placeUnlocked(d)

	qt.v.mu.Lock()
	if q, ok := qt.queues[d.Name]; ok {
		qt.v.mu.Unlock()
		return qt.redeclare(q, owner, d)
	}
	defer qt.v.mu.Unlock()

	typ, err := qt.checkNewLocked(d, serverNamed)
	if err != nil {
		return nil, queue.Stats{}, err
	}
	rec, persist, err := qt.newRecord(d, typ)
	if err != nil {
		return nil, queue.Stats{}, err
	}
	qt.placeLocked(&rec, persist, placed, d)
	return qt.createLocked(rec, persist, owner, d)
}

// declarePassive checks that a queue exists and owner may use it.
func (qt *queueTable) declarePassive(u *User, owner OwnerID, d QueueDeclare) (*Queue, queue.Stats, error) {
	if d.Name == "" {
		return nil, queue.Stats{}, qt.v.notFound("queue", d.Name)
	}
	// Permission first, as in RabbitMQ: a user without access learns
	// nothing about whether the queue exists.
	if err := qt.v.checkAny(u, "queue", d.Name); err != nil {
		return nil, queue.Stats{}, err
	}
	q, err := qt.LookupQueue(nil, owner, d.Name, Read)
	if err != nil {
		return nil, queue.Stats{}, err
	}
	return q, q.engine.Stats(), nil
}

// nameDeclared settles what a declaration names: an exclusive queue is
// transient, an empty name gets a server-chosen one (serverNamed), and
// the name must be neither reserved nor refused to u.
func (qt *queueTable) nameDeclared(u *User, d QueueDeclare) (_ QueueDeclare, serverNamed bool, _ error) {
	// An exclusive queue dies with its connection, so RabbitMQ records
	// it as transient whatever durable says (Durable = DurableDeclare
	// andalso not ExclusiveDeclare); redeclaring it either way is
	// equivalent.
	if d.Exclusive {
		d.Durable = false
	}
	serverNamed = d.Name == ""
	if serverNamed {
		d.Name = generateQueueName()
	} else if strings.HasPrefix(d.Name, "amq.") {
		return d, false, wire.Errorf(wire.AccessRefused, "queue name '%s' contains reserved prefix 'amq.*'", d.Name)
	}
	if err := qt.v.check(u, Configure, "queue", d.Name); err != nil {
		return d, serverNamed, err
	}
	return d, serverNamed, nil
}

// placeUnlocked places the queue d declares, if it does not exist yet,
// before the vhost's write lock is taken: placement looks at every
// vhost's queues. The type is guessed (queueTypeHint); policies count
// (queue-leader-locator). Nil if the queue exists.
func (qt *queueTable) placeUnlocked(d QueueDeclare) *catalog.Queue {
	qt.v.mu.RLock()
	_, exists := qt.queues[d.Name]
	hint := qt.queueTypeHint(d)
	placeArgs := qt.v.effectiveArgsLocked(d.Name, hint, d.Arguments)
	qt.v.mu.RUnlock()
	if exists {
		return nil
	}
	placed := &catalog.Queue{Type: hint}
	qt.v.b.place(placed, placeArgs)
	return placed
}

// redeclare answers a declaration of q, which exists: owner must be
// allowed to use it and d must be equivalent. It renews q's x-expires
// lease.
func (qt *queueTable) redeclare(q *Queue, owner OwnerID, d QueueDeclare) (*Queue, queue.Stats, error) {
	if err := qt.accessible(q, owner); err != nil {
		return nil, queue.Stats{}, err
	}
	if err := q.checkEquivalent(d); err != nil {
		return nil, queue.Stats{}, err
	}
	// A redeclaration renews the x-expires lease (the TTL guide).
	// It costs a log entry, so only queues with a lease pay it.
	if t, ok := q.engine.(toucher); ok && q.eff["x-expires"] != nil {
		if err := t.Touch(); err != nil {
			qt.v.b.log.Debug("renew queue lease", "vhost", qt.v.name, "queue", d.Name, "err", err)
		}
	}
	return q, q.engine.Stats(), nil
}

// checkNewLocked checks that the vhost may have the new queue d declares,
// and returns its type. v.mu is held.
func (qt *queueTable) checkNewLocked(d QueueDeclare, serverNamed bool) (string, error) {
	if !d.Durable && !d.Exclusive && qt.v.b.cfg.DenyTransientQueues {
		return "", deprecatedDenied("transient_nonexcl_queues")
	}
	if err := qt.v.checkQueueLimitLocked(d.Name); err != nil {
		return "", err
	}
	return qt.queueType(d, serverNamed)
}

// newRecord is the record of the new queue d declares, of type typ, not
// placed yet, and whether the metadata store is to hold it.
func (qt *queueTable) newRecord(d QueueDeclare, typ string) (_ catalog.Queue, persist bool, _ error) {
	argBytes, err := encodeTable(d.Arguments)
	if err != nil {
		return catalog.Queue{}, false, err
	}
	rec := catalog.Queue{
		Vhost:      qt.v.name,
		Name:       d.Name,
		Type:       typ,
		Durable:    d.Durable,
		AutoDelete: d.AutoDelete,
		Arguments:  argBytes,
		Created:    time.Now().UnixMilli(),
	}
	persist = d.Durable && !d.Exclusive
	if qt.v.b.shared() {
		// On a cluster every queue is recorded, for every node to route
		// to it (remote.go); an in-memory one lives on this node.
		persist = true
		rec.Exclusive, rec.Boot = d.Exclusive, qt.v.b.cfg.Cluster.Boot()
	}
	return rec, persist, nil
}

// placeLocked sets rec's ID, members and leader: a replicated queue's
// from placed, placed again if that is missing or of another type (which
// releases the vhost's lock meanwhile); an in-memory recorded one's this
// node. v.mu is held.
func (qt *queueTable) placeLocked(rec *catalog.Queue, persist bool, placed *catalog.Queue, d QueueDeclare) {
	if isReplicated(*rec, 0) {
		if placed == nil || placed.Type != rec.Type {
			// Declared, deleted and declared again between the look
			// and the lock, or typed differently than guessed: place
			// now (this vhost's own queues are counted under its lock).
			// A queue of the same name created meanwhile makes the
			// Create below fail, and the declaration is retried.
			placed = &catalog.Queue{Type: rec.Type}
			placeArgs := qt.v.effectiveArgsLocked(d.Name, rec.Type, d.Arguments)
			qt.v.mu.Unlock()
			qt.v.b.place(placed, placeArgs)
			qt.v.mu.Lock()
		}
		rec.ID, rec.Members, rec.Leader = newQueueID(), placed.Members, placed.Leader
	} else if persist {
		// An in-memory queue (a durable auto-delete classic one, and
		// on a cluster every exclusive and transient one) lives on
		// this node only.
		rec.Members, rec.Leader = []string{qt.v.b.cfg.NodeID}, qt.v.b.cfg.NodeID
		if qt.v.b.shared() {
			rec.ID = newQueueID()
		}
	}
}

// createLocked commits rec if persist, then starts and registers the
// queue; it is owner's if d is exclusive. v.mu is held.
func (qt *queueTable) createLocked(rec catalog.Queue, persist bool, owner OwnerID, d QueueDeclare) (*Queue, queue.Stats, error) {
	if persist {
		// Committed first: on a cluster the other members start their
		// replicas from this record, and two nodes declaring the same
		// queue at once must not both create it.
		if err := qt.v.b.store.Apply(catalog.Create(rec)); err != nil {
			if errors.Is(err, catalog.ErrExists) {
				return nil, queue.Stats{}, errDeclaredMeanwhile
			}
			return nil, queue.Stats{}, qt.v.persistFailed(err)
		}
	}
	q, err := qt.addQueue(rec, d.Arguments)
	if err != nil {
		if persist {
			qt.v.persist(catalog.Del(rec))
		}
		return nil, queue.Stats{}, err
	}
	if d.Exclusive {
		q.owner = owner
	}
	qt.v.b.log.Debug("queue declared", "vhost", qt.v.name, "queue", d.Name, "type", rec.Type, "durable", d.Durable, "exclusive", d.Exclusive)
	// A new queue is empty: no need to ask its leader, which on a
	// cluster may still be electing itself.
	return q, queue.Stats{}, nil
}

// LookupQueue finds a queue that owner may use with access a (read for
// consume, get and purge). A nil user skips the permission check.
func (qt *queueTable) LookupQueue(u *User, owner OwnerID, name string, a Access) (*Queue, error) {
	// Permission before existence, as RabbitMQ checks (check_read_permitted
	// then with_exclusive_access_or_die).
	if err := qt.v.check(u, a, "queue", name); err != nil {
		return nil, err
	}
	qt.v.mu.RLock()
	q, ok := qt.queues[name]
	qt.v.mu.RUnlock()
	if !ok && qt.v.b.fresh.catchUp() {
		qt.v.mu.RLock()
		q, ok = qt.queues[name]
		qt.v.mu.RUnlock()
	}
	if !ok {
		return nil, qt.v.notFound("queue", name)
	}
	if err := qt.accessible(q, owner); err != nil {
		return nil, err
	}
	return q, nil
}

// PurgeQueue removes a queue's ready messages.
func (qt *queueTable) PurgeQueue(u *User, owner OwnerID, name string) (uint32, error) {
	q, err := qt.LookupQueue(u, owner, name, Read)
	if err != nil {
		return 0, err
	}
	n, err := q.engine.Purge()
	if nd := NodeDown(err, name, qt.v.name); nd != nil {
		return 0, nd
	}
	return n, err
}

// NodeDown is RabbitMQ's 404 for a queue whose node is down, when err
// says so (queue.NodeDownError), else nil.
func NodeDown(err error, queueName, vhost string) error {
	var nd *queue.NodeDownError
	if !errors.As(err, &nd) {
		return nil
	}
	return wire.Errorf(wire.NotFound, "home node '%s' of queue '%s' in vhost '%s' is down or inaccessible", nd.Node, queueName, vhost)
}

// DeleteQueue deletes a queue and returns the number of messages it held.
// Deleting a queue that does not exist succeeds with zero, as in
// RabbitMQ, so that clean-up code can run twice.
func (qt *queueTable) DeleteQueue(u *User, owner OwnerID, name string, ifUnused, ifEmpty bool) (uint32, error) {
	// Permission first, as in RabbitMQ: deleting a missing queue one may
	// not configure is refused, not a silent success.
	if err := qt.v.check(u, Configure, "queue", name); err != nil {
		return 0, err
	}
	qt.v.mu.RLock()
	q, ok := qt.queues[name]
	qt.v.mu.RUnlock()
	if !ok {
		return 0, nil
	}
	if err := qt.accessible(q, owner); err != nil {
		return 0, err
	}
	return qt.deleteQueue(q, ifUnused, ifEmpty)
}

// The vhost's lock is held while the queue is unlinked, not while its
// engine is deleted: for a replicated queue that is a call to its leader,
// which for a queue still electing one waits, and meanwhile this node
// could apply no metadata (the subscriber needs the lock), which held up
// every other new queue's first election.
func (qt *queueTable) deleteQueue(q *Queue, ifUnused, ifEmpty bool) (uint32, error) {
	if qt.v.b.goesWithNode(q) {
		qt.dropQueue(q)
		return 0, nil
	}
	var before queue.Stats
	if q.rec.Type == QueueTypeQuorum && !ifUnused && !ifEmpty {
		// delete-ok's count is the leader's, asked before the deletion
		// is committed (every member drops its replica as it applies
		// it): this node's member, a follower, may not have applied the
		// last publishes yet (raft tells followers of a commit with the
		// next entry). Publishes committed between the two are deleted
		// uncounted.
		before = q.engine.Stats()
	}
	qt.v.mu.Lock()
	locked := true
	defer func() {
		if locked {
			qt.v.mu.Unlock()
		}
	}()
	if qt.queues[q.rec.Name] != q {
		return 0, nil // deleted meanwhile
	}
	if (ifUnused || ifEmpty) && q.rec.Type == QueueTypeQuorum {
		// With both flags RabbitMQ names if-unused (its first clause).
		flag := "if-empty"
		if ifUnused {
			flag = "if-unused"
		}
		// RabbitMQ refuses these on quorum queues, as a connection error.
		return 0, wire.Errorf(wire.NotImplemented, "cannot delete %s. queue.delete operations with %s flag set are not supported by quorum queues", q.describe(), flag)
	}
	if ifEmpty || ifUnused {
		st := q.engine.Stats() // not a quorum queue: local
		if ifEmpty && st.Ready > 0 {
			return 0, wire.Errorf(wire.PreconditionFailed, "%s not empty", q.describe())
		}
		if ifUnused && st.Consumers > 0 {
			return 0, wire.Errorf(wire.PreconditionFailed, "%s in use", q.describe())
		}
	}
	var changes []catalog.Change
	if q.recorded() {
		changes = append(changes, catalog.Del(q.rec))
	}
	var emptied []*exchange
	for b, x := range q.bindings {
		if c, ok := qt.v.unbindLocked(x, b); ok {
			changes = append(changes, c)
		}
		if x.rec.AutoDelete && len(x.bindings) == 0 {
			emptied = append(emptied, x)
		}
	}
	for _, x := range emptied {
		changes = append(changes, qt.v.dropExchangeLocked(x)...)
	}
	if err := qt.v.persist(changes...); err != nil {
		return 0, err
	}
	delete(qt.queues, q.rec.Name)
	qt.v.b.served.remove(q)
	qt.v.mu.Unlock()
	locked = false
	n, err := q.engine.Delete(ifUnused, ifEmpty)
	if err != nil {
		// A consumer attached or a message arrived between the checks
		// above and here; the queue is already unlinked, so delete it
		// regardless rather than leave it half-removed.
		n, _ = q.engine.Delete(false, false)
	}
	if q.rec.Type == QueueTypeQuorum {
		n = before.Ready
	}
	qt.v.b.log.Debug("queue deleted", "vhost", qt.v.name, "queue", q.rec.Name, "messages", n)
	return n, nil
}

// toucher is a queue with an x-expires lease that a redeclaration renews.
type toucher interface{ Touch() error }

// expire deletes a queue that x-expires found unused. The queue itself
// decided (a quorum queue through its log), so there is nothing to check.
func (qt *queueTable) expire(q *Queue) {
	if _, err := qt.deleteQueue(q, false, false); err != nil {
		qt.v.b.log.Warn("delete expired queue", "vhost", qt.v.name, "queue", q.rec.Name, "err", err)
		return
	}
	qt.v.b.log.Debug("queue expired", "vhost", qt.v.name, "queue", q.rec.Name)
}

// autoDelete removes an auto-delete queue whose last consumer left.
func (qt *queueTable) autoDelete(q *Queue) {
	if _, err := qt.deleteQueue(q, true, false); err != nil {
		qt.v.b.log.Debug("auto-delete skipped", "queue", q.rec.Name, "err", err)
	}
}

// ReleaseOwner deletes the exclusive queues of a closing connection.
func (qt *queueTable) ReleaseOwner(owner OwnerID) {
	qt.v.mu.RLock()
	var owned []*Queue
	for _, q := range qt.queues {
		if q.owner == owner {
			owned = append(owned, q)
		}
	}
	qt.v.mu.RUnlock()
	for _, q := range owned {
		if _, err := qt.deleteQueue(q, false, false); err != nil {
			qt.v.b.log.Warn("delete exclusive queue", "queue", q.rec.Name, "err", err)
		}
	}
}
