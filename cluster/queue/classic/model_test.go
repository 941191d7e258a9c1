package classic

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/warrenmq/warren/cluster/queue"
)

// TestQueueAgainstModel runs random sequences of operations on a Queue and on
// a plain reference model of where each message is, checking after every
// step that the two agree and that the dispatch rules held.
//
// The model does not re-implement round-robin; instead each delivery is
// checked as it happens (inside Deliver, which runs synchronously) against
// the rules any correct dispatch must obey: right consumer (able to receive,
// no able consumer of higher priority), right message (the lowest ready ID,
// which puts requeued messages first), right Redelivered flag.
func TestQueueAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newModel(t)
		t.Repeat(map[string]func(*rapid.T){
			"enqueue": m.enqueue,
			"consume": m.consume,
			"cancel":  m.cancel,
			"resume":  m.resume,
			"get":     m.get,
			"settle":  m.settle,
			"requeue": m.requeue,
			"discard": m.discard,
			"purge":   m.purge,
			"":        m.check,
		})
	})
}

type place int

const (
	placeReady place = iota
	placeUnsettled
	placeGone
)

type model struct {
	t *rapid.T
	q *Queue

	lastID    uint64
	where     map[uint64]place
	owner     map[uint64]*modelConsumer // for unsettled IDs; nil for basic.get
	delivered map[uint64]bool           // delivered at least once: Redelivered next time
	consumers []*modelConsumer          // every consumer ever made, attached or not

	budget *queue.Budget // counts the bytes the queue holds

	everConsumed bool
	unusedCalls  int
	unusedWanted int
}

// modelConsumer is both the fake queue.Consumer and the model's view of it.
type modelConsumer struct {
	m        *model
	n        int
	opts     queue.ConsumeOptions
	attached bool
	blocked  bool
	// room is how many more deliveries it accepts; the one after that
	// returns false from Deliver and blocks it.
	room      int
	unsettled int
}

func newModel(t *rapid.T) *model {
	m := &model{
		t:         t,
		where:     map[uint64]place{},
		owner:     map[uint64]*modelConsumer{},
		delivered: map[uint64]bool{},
	}
	m.budget = queue.NewBudget(1 << 40)
	m.q = New("model", Options{OnUnused: func() { m.unusedCalls++ }, Budget: m.budget})
	return m
}

func (c *modelConsumer) canReceive() bool {
	return c.attached && !c.blocked &&
		(c.opts.NoAck || c.opts.Prefetch == 0 || uint32(c.unsettled) < c.opts.Prefetch)
}

func (c *modelConsumer) Deliver(d queue.Delivery) bool {
	m, t := c.m, c.m.t
	if !c.canReceive() {
		t.Fatalf("message %d delivered to consumer %d, which cannot receive: %+v", d.ID, c.n, *c)
	}
	for _, o := range m.consumers {
		if o.opts.Priority > c.opts.Priority && o.canReceive() {
			t.Fatalf("message %d went to consumer %d (priority %d) while %d (priority %d) could receive",
				d.ID, c.n, c.opts.Priority, o.n, o.opts.Priority)
		}
	}
	m.checkNextReady(d)
	m.delivered[d.ID] = true
	if c.opts.NoAck {
		m.where[d.ID] = placeGone
	} else {
		m.where[d.ID] = placeUnsettled
		m.owner[d.ID] = c
		c.unsettled++
	}
	if c.room > 0 {
		c.room--
		return true
	}
	c.blocked = true
	return false
}

func (c *modelConsumer) Gone() { c.m.t.Fatalf("Gone called without Delete") }

func (c *modelConsumer) TimedOut(time.Duration) { c.m.t.Fatalf("TimedOut called by a classic queue") }

// checkNextReady checks that d is the message the queue should hand out now:
// the lowest ready ID (so requeued ones before never-delivered ones), with
// Redelivered set exactly when it was delivered before.
func (m *model) checkNextReady(d queue.Delivery) {
	ready := m.ids(placeReady)
	if len(ready) == 0 {
		m.t.Fatalf("message %d handed out while the model has nothing ready", d.ID)
	}
	if d.ID != ready[0] {
		m.t.Fatalf("message %d handed out; the next ready is %d (ready: %v)", d.ID, ready[0], ready)
	}
	if d.Redelivered != m.delivered[d.ID] {
		m.t.Fatalf("message %d: Redelivered = %v, want %v", d.ID, d.Redelivered, m.delivered[d.ID])
	}
	if !d.Redelivered && slices.ContainsFunc(ready, func(id uint64) bool { return m.delivered[id] }) {
		m.t.Fatalf("never-delivered message %d handed out before a requeued one", d.ID)
	}
}

// ids lists the IDs in place p, in ascending order.
func (m *model) ids(p place) []uint64 {
	var ids []uint64
	for id, w := range m.where {
		if w == p {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (m *model) attached() []*modelConsumer {
	var cs []*modelConsumer
	for _, c := range m.consumers {
		if c.attached {
			cs = append(cs, c)
		}
	}
	return cs
}

func (m *model) enqueue(t *rapid.T) {
	m.lastID++
	m.where[m.lastID] = placeReady // before the call: Enqueue may deliver it at once
	var doneErr error = errNotCalled
	msg := &queue.Message{Body: make([]byte, modelSize(m.lastID))}
	err := m.q.Enqueue(context.Background(), msg, func(err error) { doneErr = err })
	if err != nil || doneErr != nil {
		t.Fatalf("Enqueue = %v, done(%v)", err, doneErr)
	}
}

func (m *model) consume(t *rapid.T) {
	attached := m.attached()
	if len(attached) > 0 && rapid.Bool().Draw(t, "same consumer again") {
		c := rapid.SampledFrom(attached).Draw(t, "consumer")
		if err := m.q.Consume(c, queue.ConsumeOptions{}); !errors.Is(err, ErrAlreadyConsuming) {
			t.Fatalf("Consume of an attached consumer: %v", err)
		}
		return
	}
	c := &modelConsumer{
		m: m,
		n: len(m.consumers),
		opts: queue.ConsumeOptions{
			NoAck:     rapid.IntRange(0, 3).Draw(t, "noAck") == 0,
			Exclusive: rapid.IntRange(0, 5).Draw(t, "exclusive") == 0,
			Prefetch:  rapid.Uint32Range(0, 3).Draw(t, "prefetch"),
			Priority:  rapid.Int32Range(-1, 1).Draw(t, "priority"),
		},
		room: rapid.IntRange(0, 3).Draw(t, "room"),
	}
	var wantErr error
	for _, o := range attached {
		if o.opts.Exclusive || c.opts.Exclusive {
			wantErr = queue.ErrExclusiveConsumer
		}
	}
	m.consumers = append(m.consumers, c)
	c.attached = wantErr == nil
	if err := m.q.Consume(c, c.opts); !errors.Is(err, wantErr) {
		t.Fatalf("Consume(%+v) = %v, want %v", c.opts, err, wantErr)
	}
	m.everConsumed = m.everConsumed || c.attached
}

func (m *model) cancel(t *rapid.T) {
	if len(m.consumers) == 0 {
		t.Skip("no consumers")
	}
	c := rapid.SampledFrom(m.consumers).Draw(t, "consumer")
	wasAttached := c.attached
	c.attached = false
	if wasAttached && len(m.attached()) == 0 && m.everConsumed {
		m.unusedWanted = 1
	}
	m.q.Cancel(c)
}

func (m *model) resume(t *rapid.T) {
	if len(m.consumers) == 0 {
		t.Skip("no consumers")
	}
	c := rapid.SampledFrom(m.consumers).Draw(t, "consumer")
	if c.attached && c.blocked {
		c.blocked = false
		c.room = rapid.IntRange(0, 3).Draw(t, "room")
	}
	m.q.Resume(c)
}

func (m *model) get(t *rapid.T) {
	noAck := rapid.Bool().Draw(t, "noAck")
	ready := m.ids(placeReady)
	d, remaining, ok, err := m.q.Get(noAck)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if ok != (len(ready) > 0) {
		t.Fatalf("Get ok = %v with %d ready", ok, len(ready))
	}
	if !ok {
		return
	}
	m.checkNextReady(d)
	if int(remaining) != len(ready)-1 {
		t.Fatalf("Get remaining = %d, want %d", remaining, len(ready)-1)
	}
	m.delivered[d.ID] = true
	if noAck {
		m.where[d.ID] = placeGone
	} else {
		m.where[d.ID] = placeUnsettled
		m.owner[d.ID] = nil
	}
}

// pickUnsettled draws some unsettled IDs, in any order, sometimes with an ID
// that is not unsettled (which the queue must ignore).
func (m *model) pickUnsettled(t *rapid.T) []uint64 {
	ids := m.ids(placeUnsettled)
	var picked []uint64
	if len(ids) > 0 {
		picked = rapid.SliceOfNDistinct(rapid.SampledFrom(ids), 1, len(ids), rapid.ID[uint64]).Draw(t, "ids")
	}
	if rapid.IntRange(0, 4).Draw(t, "bogus") == 0 {
		picked = append(picked, rapid.Uint64Range(0, m.lastID+2).Draw(t, "bogus id"))
	}
	if len(picked) == 0 {
		t.Skip("nothing to settle")
	}
	return picked
}

// release moves the picked IDs that are unsettled to place p, freeing their
// owners' credit. The model moves first because the queue dispatches (and
// calls Deliver) before Settle, Requeue or Discard return.
func (m *model) release(ids []uint64, p place) {
	for _, id := range ids {
		if w, ok := m.where[id]; !ok || w != placeUnsettled {
			continue
		}
		if c := m.owner[id]; c != nil {
			c.unsettled--
		}
		delete(m.owner, id)
		m.where[id] = p
	}
}

func (m *model) settle(t *rapid.T) {
	ids := m.pickUnsettled(t)
	m.release(ids, placeGone)
	m.q.Settle(ids)
}

func (m *model) requeue(t *rapid.T) {
	ids := m.pickUnsettled(t)
	m.release(ids, placeReady)
	m.q.Requeue(ids, queue.ReturnCause(rapid.IntRange(0, 2).Draw(t, "cause")))
}

func (m *model) discard(t *rapid.T) {
	ids := m.pickUnsettled(t)
	m.release(ids, placeGone)
	m.q.Discard(ids, queue.ReturnReject)
}

func (m *model) purge(t *rapid.T) {
	ready := m.ids(placeReady)
	for _, id := range ready {
		m.where[id] = placeGone
	}
	n, err := m.q.Purge()
	if err != nil || int(n) != len(ready) {
		t.Fatalf("Purge = (%d, %v), want (%d, nil)", n, err, len(ready))
	}
}

// check compares the queue's state with the model's after every step.
func (m *model) check(t *rapid.T) {
	ready, unsettled := m.ids(placeReady), m.ids(placeUnsettled)
	attached := m.attached()
	want := queue.Stats{Ready: uint32(len(ready)), Unacked: uint32(len(unsettled)), Consumers: uint32(len(attached))}
	if got := m.q.Stats(); got != want {
		t.Fatalf("Stats = %+v, model says %+v", got, want)
	}
	var held int64
	for _, id := range append(ready, unsettled...) {
		held += int64(modelSize(id))
	}
	if got := m.budget.Used(); got != held {
		t.Fatalf("memory budget counts %d bytes, the queue holds %d", got, held)
	}

	q := m.q
	q.mu.Lock()
	defer q.mu.Unlock()

	// Every message is in exactly one place: the queue's ready structures
	// hold exactly the model's ready IDs, once each, and its unsettled map
	// exactly the model's unsettled IDs, each with the model's owner.
	var qReady []uint64
	q.ready.returned.each(func(e entry) { qReady = append(qReady, e.id) })
	q.ready.fresh.each(func(e entry) { qReady = append(qReady, e.id) })
	slices.Sort(qReady)
	if !slices.Equal(qReady, ready) {
		t.Fatalf("queue's ready IDs %v, model's %v", qReady, ready)
	}
	qUnsettled := slices.Sorted(maps.Keys(q.unsettled))
	if !slices.Equal(qUnsettled, unsettled) {
		t.Fatalf("queue's unsettled IDs %v, model's %v", qUnsettled, unsettled)
	}
	for id, p := range q.unsettled {
		if mo := m.owner[id]; (p.owner == nil) != (mo == nil) || (mo != nil && p.owner.c != queue.Consumer(mo)) {
			t.Fatalf("message %d: queue and model disagree on its owner", id)
		}
	}

	for _, c := range m.consumers {
		if !c.opts.NoAck && c.opts.Prefetch > 0 && uint32(c.unsettled) > c.opts.Prefetch {
			t.Fatalf("consumer %d holds %d unsettled, prefetch %d", c.n, c.unsettled, c.opts.Prefetch)
		}
		if cs := q.consumers[c]; (cs != nil) != c.attached || (cs != nil && int(cs.unsettled) != c.unsettled) {
			t.Fatalf("consumer %d: queue's record %+v disagrees with model %+v", c.n, cs, *c)
		}
		// Nothing stalls: a message is left ready only if nobody can take it.
		if len(ready) > 0 && c.canReceive() {
			t.Fatalf("%d messages ready while consumer %d can receive", len(ready), c.n)
		}
	}

	if m.unusedCalls != m.unusedWanted {
		t.Fatalf("OnUnused called %d times, want %d", m.unusedCalls, m.unusedWanted)
	}
}

// modelSize is message id's body size: varied, and known without storing it.
func modelSize(id uint64) int { return int(id % 7) }
