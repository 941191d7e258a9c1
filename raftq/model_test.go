package raftq

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestMachineAgainstModel applies random command sequences, with random
// queue arguments and time jumps (forwards, and backwards as after a leader
// change to a node with a slower clock), to the machine and to a small
// reference model written for clarity instead of speed: plain slices,
// linear scans. After every command it checks that
//
//   - the machine's effects are exactly the model's, in order (so every
//     delivery went to the consumer the rules choose, with the message the
//     rules choose: returned ones first, then by priority, then FIFO;
//     nothing ready is skipped, nothing expired delivered, no credit
//     exceeded: the model refuses to deliver past a consumer's prefetch);
//   - every message ever stored is in exactly one place, the same in both:
//     ready (in the same order), checked out by the same consumer (in
//     delivery order), awaiting dead-letter confirmation, or gone with a
//     recorded reason;
//   - delivery-count and acquired-count never decrease;
//   - Stats, NextDeadline and AppendLiveIndexes agree with the model, and
//     the machine's internal invariants hold;
//   - a machine restored from a snapshot taken at a random earlier point and
//     given the same commands since has produced the same effects and
//     snapshots to the same bytes.
func TestMachineAgainstModel(t *testing.T) {
	seen := map[EffectKind]int{}
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rt)
		h.seen = seen
		actions := map[string]func(*rapid.T){
			"enqueue":   h.enqueue,
			"attach":    h.attach,
			"detach":    h.consumerOp(OpDetach),
			"down":      h.consumerOp(OpConsumerDown),
			"suspend":   h.consumerOp(OpSuspend),
			"settle":    h.release(OpSettle),
			"return":    h.release(OpReturn),
			"discard":   h.release(OpDiscard),
			"get":       h.get,
			"tick":      h.simple(OpTick),
			"purge":     h.purge,
			"touch":     h.simple(OpTouch),
			"dlSettled": h.dlSettled,
			"pubDown":   h.pubDown,
			"snapshot":  h.snapshot,
			"update":    h.update,
			"upgrade":   h.upgrade,
		}
		// Weighted: messages must pile up for the rules to matter.
		names := []string{"enqueue", "enqueue", "enqueue", "enqueue", "attach", "attach",
			"settle", "settle", "return", "discard", "get", "get", "tick", "tick",
			"detach", "down", "suspend", "purge", "touch", "dlSettled", "pubDown", "snapshot", "update", "upgrade"}
		if len(names) < len(actions) {
			rt.Fatal("an action is missing from the weights")
		}
		// Long sequences: queues get interesting after a while.
		steps := rapid.IntRange(50, 300).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			actions[rapid.SampledFrom(names).Draw(rt, "action")](rt)
			h.check(rt)
		}
	})
	// The generators must reach every rule: each kind of effect shows up.
	for k := EffectDeliver; k <= EffectDeleteQueue; k++ {
		if seen[k] == 0 && !t.Failed() {
			t.Errorf("no %s effect in the whole run: the generators miss a rule", k)
		}
	}
	t.Logf("effects seen: %v", seen)
}

type harness struct {
	t      *rapid.T
	m      *Machine
	shadow *Machine // restored from a snapshot, then fed the same commands
	model  *model
	index  uint64
	now    int64
	seqs   map[uint64]uint64 // next sequence number per publisher
	maxDC  map[uint64]uint32 // highest delivery-count seen per message
	maxAC  map[uint64]uint32
	seen   map[EffectKind]int
}

// randomConfig draws a queue configuration as ParseConfig could make it.
func randomConfig(t *rapid.T) Config {
	cfg := DefaultConfig()
	cfg.DeliveryLimit = rapid.SampledFrom([]int64{-1, 0, 1, 2, 20}).Draw(t, "delivery-limit")
	cfg.DeadLettering = rapid.Bool().Draw(t, "dlx")
	if cfg.DeadLettering {
		cfg.DeadLetterExchange = rapid.SampledFrom([]string{"", "dlx", "other"}).Draw(t, "dlx name")
	}
	cfg.Overflow = rapid.SampledFrom([]Overflow{DropHead, RejectPublish}).Draw(t, "overflow")
	if cfg.DeadLettering && cfg.Overflow == RejectPublish && rapid.Bool().Draw(t, "at-least-once") {
		cfg.Strategy = AtLeastOnce
	}
	cfg.MaxLength = rapid.SampledFrom([]int64{Unset, Unset, 0, 1, 3, 6}).Draw(t, "max-length")
	cfg.MaxLengthBytes = rapid.SampledFrom([]int64{Unset, Unset, 0, 5, 20}).Draw(t, "max-length-bytes")
	cfg.MessageTTL = rapid.SampledFrom([]int64{Unset, Unset, 0, 5, 30}).Draw(t, "message-ttl")
	cfg.Expires = rapid.SampledFrom([]int64{Unset, Unset, 20, 100}).Draw(t, "expires")
	cfg.SingleActiveConsumer = rapid.Bool().Draw(t, "single-active-consumer")
	cfg.ConsumerTimeout = rapid.SampledFrom([]int64{0, 10, 40, 1000}).Draw(t, "consumer-timeout")
	if typ := rapid.SampledFrom([]RetryType{RetryDisabled, RetryDisabled, RetryAll, RetryFailed, RetryReturned}).Draw(t, "delayed-retry-type"); typ != RetryDisabled {
		cfg.Retry.Type = typ
		cfg.Retry.Min = rapid.SampledFrom([]int64{1, 5, 20}).Draw(t, "delayed-retry-min")
		cfg.Retry.Max = rapid.SampledFrom([]int64{1, 10, 60}).Draw(t, "delayed-retry-max") // below min too, as arguments allow
	}
	return cfg
}

func newHarness(t *rapid.T) *harness {
	cfg := randomConfig(t)
	created := int64(1_000_000)
	return &harness{
		t:     t,
		m:     New(cfg, created),
		model: newModel(cfg, created),
		now:   created,
		seqs:  map[uint64]uint64{},
		maxDC: map[uint64]uint32{},
		maxAC: map[uint64]uint32{},
	}
}

// apply runs c at the next index on the machine, its shadow and the model,
// and compares their effects.
func (h *harness) apply(c Command) {
	h.index += 1 + uint64(rapid.IntRange(0, 2).Draw(h.t, "index gap"))
	step := rapid.IntRange(0, 9).Draw(h.t, "time step")
	switch {
	case step < 4:
	case step < 8:
		h.now += int64(rapid.IntRange(1, 15).Draw(h.t, "jump"))
	case step < 9:
		h.now += int64(rapid.IntRange(16, 200).Draw(h.t, "big jump"))
	default:
		h.now -= int64(rapid.IntRange(1, 30).Draw(h.t, "clock goes back"))
	}
	c.Now = h.now
	var dec Command
	if err := Decode(c.Append(nil), &dec); err != nil {
		h.t.Fatalf("%+v: %v", c, err)
	}
	meta := Meta{Index: h.index}
	got := h.m.Apply(meta, &dec, nil)
	want := h.model.apply(h.t, meta.Index, &dec)
	if !slices.Equal(got, want) {
		h.t.Fatalf("%s at %d (now %d): machine effects\n  %v\nmodel effects\n  %v\nmachine state:\n  %s",
			c.Op, h.index, h.now, got, want, bytes.Join(dumpBytes(h.m), []byte("\n  ")))
	}
	if h.shadow != nil {
		if again := h.shadow.Apply(meta, &dec, nil); !slices.Equal(again, got) {
			h.t.Fatalf("%s: restored machine effects %v, original %v", c.Op, again, got)
		}
	}
	for _, e := range got {
		h.seen[e.Kind]++
		h.counts(e.Index, e.DeliveryCount, e.AcquiredCount, e.Kind)
	}
}

func dumpBytes(m *Machine) [][]byte {
	var out [][]byte
	for _, l := range dump(m) {
		out = append(out, []byte(l))
	}
	return out
}

// counts checks that a message's counters never decrease.
func (h *harness) counts(id uint64, dc, ac uint32, k EffectKind) {
	switch k {
	case EffectDeliver, EffectGetResult:
		ac++ // the effect shows the count before this delivery
	case EffectDeadLetter, EffectDrop:
	default:
		return
	}
	if dc < h.maxDC[id] || ac < h.maxAC[id] {
		h.t.Fatalf("m%d: counts went from dc=%d ac=%d to dc=%d ac=%d", id, h.maxDC[id], h.maxAC[id], dc, ac)
	}
	h.maxDC[id], h.maxAC[id] = dc, ac
}

func (h *harness) enqueue(t *rapid.T) {
	c := Command{Op: OpEnqueue}
	if pub := rapid.IntRange(0, 2).Draw(t, "publisher"); pub > 0 {
		c.Publisher = uint64(pub)
		next, known := h.seqs[c.Publisher]
		if !known {
			next = uint64(rapid.IntRange(1, 3).Draw(t, "first seq"))
		}
		switch rapid.IntRange(0, 9).Draw(t, "seq kind") {
		case 0:
			c.Seq = next + 1 // skips ahead
		case 1:
			if next > 1 {
				c.Seq = next - uint64(rapid.IntRange(1, int(min(next-1, 5))).Draw(t, "dup back"))
				break
			}
			fallthrough
		default:
			c.Seq = next
		}
		if c.Seq == next {
			h.seqs[c.Publisher] = next + 1
		}
	}
	c.Size = uint32(rapid.IntRange(0, 6).Draw(t, "size"))
	if rapid.Bool().Draw(t, "has priority") {
		c.HasPriority, c.Priority = true, uint8(rapid.SampledFrom([]int{0, 3, 4, 5, 31, 200}).Draw(t, "priority"))
	}
	if rapid.IntRange(0, 3).Draw(t, "has ttl") == 0 {
		c.HasTTL, c.TTL = true, int64(rapid.SampledFrom([]int{0, 3, 10, 50}).Draw(t, "ttl"))
	}
	h.apply(c)
}

func (h *harness) attach(t *rapid.T) {
	c := Command{Op: OpAttach}
	c.Consumer = ConsumerID(rapid.SampledFrom([]int{1, 2, 3, 4, 4, 10}).Draw(t, "consumer"))
	c.Prefetch = uint32(rapid.SampledFrom([]int{0, 1, 1, 2, 3}).Draw(t, "prefetch"))
	c.ConsumerPriority = int32(rapid.IntRange(-1, 1).Draw(t, "consumer priority"))
	c.Exclusive = rapid.IntRange(0, 6).Draw(t, "exclusive") == 0
	if rapid.IntRange(0, 3).Draw(t, "has timeout") == 0 {
		c.HasTimeout, c.Timeout = true, int64(rapid.SampledFrom([]int{0, 5, 25, 500}).Draw(t, "timeout"))
	}
	if k := h.model.cons[c.Consumer]; k != nil && rapid.IntRange(0, 2).Draw(t, "resume") == 0 {
		// Attaching again through a new leader, having received the
		// deliveries up to some point.
		c.Resume = true
		var last uint64
		for _, id := range k.order {
			if d := h.model.held[id].delivery; rapid.Bool().Draw(t, "received") {
				last = max(last, d)
			}
		}
		c.LastDelivery = last
	}
	h.apply(c)
}

func (h *harness) consumerOp(op Op) func(*rapid.T) {
	return func(t *rapid.T) {
		h.apply(Command{Op: op, Consumer: ConsumerID(rapid.SampledFrom([]int{1, 2, 3, 4, 10, 11}).Draw(t, "consumer"))})
	}
}

// release settles, returns or discards some of a consumer's messages, in a
// random order, sometimes with an ID it does not hold.
func (h *harness) release(op Op) func(*rapid.T) {
	return func(t *rapid.T) {
		ids := slices.Sorted(maps.Keys(h.model.cons))
		if len(ids) == 0 {
			return
		}
		c := Command{Op: op, Consumer: rapid.SampledFrom(ids).Draw(t, "consumer")}
		held := h.model.cons[c.Consumer].order
		if len(held) > 0 {
			c.IDs = rapid.SliceOfNDistinct(rapid.SampledFrom(held), 1, len(held), rapid.ID[uint64]).Draw(t, "ids")
		}
		if rapid.IntRange(0, 4).Draw(t, "bogus") == 0 {
			c.IDs = append(c.IDs, rapid.Uint64Range(0, h.index+2).Draw(t, "bogus id"))
		}
		c.Cause = ReturnCause(rapid.IntRange(0, int(causeCount)-1).Draw(t, "cause"))
		if op == OpSettle {
			c.Cause = 0
		}
		h.apply(c)
	}
}

func (h *harness) get(t *rapid.T) {
	h.apply(Command{
		Op:       OpGet,
		Consumer: ConsumerID(rapid.SampledFrom([]int{10, 10, 11, 1}).Draw(t, "getter")),
		NoAck:    rapid.Bool().Draw(t, "no-ack"),
	})
}

// upgrade raises the machine version: until then a suspend changes
// nothing, and snapshots are written as before machine versions.
func (h *harness) upgrade(t *rapid.T) {
	h.apply(Command{Op: OpUpgrade, Version: uint32(rapid.IntRange(VersionSuspend, MachineVersion).Draw(t, "version"))})
}

func (h *harness) simple(op Op) func(*rapid.T) {
	return func(*rapid.T) { h.apply(Command{Op: op}) }
}

func (h *harness) purge(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "purge now") != 0 {
		return // rarely
	}
	h.apply(Command{Op: OpPurge})
}

func (h *harness) dlSettled(t *rapid.T) {
	c := Command{Op: OpDeadLetterSettled}
	var dead []uint64
	for _, d := range h.model.dead {
		dead = append(dead, d.x.id)
	}
	if len(dead) > 0 {
		c.IDs = rapid.SliceOfNDistinct(rapid.SampledFrom(dead), 1, len(dead), rapid.ID[uint64]).Draw(t, "ids")
	}
	if len(dead) == 0 || rapid.IntRange(0, 4).Draw(t, "bogus") == 0 {
		c.IDs = append(c.IDs, rapid.Uint64Range(1, h.index+2).Draw(t, "bogus id"))
	}
	h.apply(c)
}

func (h *harness) pubDown(t *rapid.T) {
	p := uint64(rapid.IntRange(1, 2).Draw(t, "publisher"))
	delete(h.seqs, p)
	h.apply(Command{Op: OpPublisherDown, Publisher: p})
}

// update changes the queue's configuration to a random one (a policy
// changed), now and then: every setting may change, and the command's
// single-active-consumer flag is random too, which the machine must ignore.
func (h *harness) update(t *rapid.T) {
	if rapid.IntRange(0, 2).Draw(t, "update now") != 0 {
		return
	}
	h.apply(Command{Op: OpUpdateConfig, Config: randomConfig(t)})
}

// snapshot restores a machine from a snapshot of the current one; from now
// on it gets the same commands.
func (h *harness) snapshot(t *rapid.T) {
	snap := h.m.AppendSnapshot(nil)
	r, err := Restore(snap)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if again := r.AppendSnapshot(nil); !bytes.Equal(again, snap) {
		t.Fatalf("a restored machine snapshots differently")
	}
	h.shadow = r
}

func (h *harness) check(t *rapid.T) {
	m, mod := h.m, h.model
	if err := checkInvariants(m); err != nil {
		t.Fatal(err)
	}
	if err := mod.checkPlaces(); err != nil {
		t.Fatal(err)
	}
	// Ready, in serving order.
	var ready []uint64
	m.ready.each(func(x *msg) { ready = append(ready, x.index) })
	if want := mod.readyIDs(); !slices.Equal(ready, want) {
		t.Fatalf("ready %v, model %v", ready, want)
	}
	// Peek names the same messages, each at its place in that order.
	for i, x := range mod.readyMsgs() {
		p, ok := m.Peek(i + 1)
		want := Peeked{Index: x.id, DeliveryCount: x.dc, AcquiredCount: x.ac, Priority: x.prio}
		if !ok || p != want {
			t.Fatalf("peek %d: %+v %v, model %+v", i+1, p, ok, want)
		}
	}
	if p, ok := m.Peek(len(ready) + 1); ok {
		t.Fatalf("peek past the %d ready: %+v", len(ready), p)
	}
	if m.version != mod.version {
		t.Fatalf("machine version %d, model %d", m.version, mod.version)
	}
	// Checked out, per consumer, in delivery order, with the same records.
	if len(m.consumers.byID) != len(mod.cons) {
		t.Fatalf("%d consumers, model %d", len(m.consumers.byID), len(mod.cons))
	}
	for id, mc := range mod.cons {
		c := m.consumers.byID[id]
		if c == nil || c.attached != mc.attached || c.getter != mc.getter || c.quiescing != mc.quiescing || c.suspended != mc.suspended || int(c.held) != len(mc.order) {
			t.Fatalf("consumer %d: machine %+v, model %+v", id, c, mc)
		}
		var order []uint64
		for i := 0; i < c.order.len(); i++ {
			if d := *c.order.at(i); m.checkouts.live(c, d) {
				order = append(order, d.index)
				hm, hd := m.checkouts.held[d.index], mod.held[d.index]
				if hm.msg != hd.x.toMsg() || hm.deadline != hd.deadline {
					t.Fatalf("m%d checked out: machine %+v, model %+v", d.index, hm, hd)
				}
				if c, i, ok := m.HeldBy(hd.delivery); !ok || c != id || i != d.index {
					t.Fatalf("delivery %d: HeldBy says %d m%d %v, model %d m%d", hd.delivery, c, i, ok, id, d.index)
				}
			}
		}
		if !slices.Equal(order, mc.order) {
			t.Fatalf("consumer %d holds %v, model %v", id, order, mc.order)
		}
	}
	if (m.consumers.active == nil) != (mod.active == 0) || (m.consumers.active != nil && m.consumers.active.id != mod.active) {
		t.Fatalf("active consumer differs from the model's %d", mod.active)
	}
	var dead []uint64
	for i := 0; i < m.dead.order.len(); i++ {
		if _, ok := m.dead.byIndex[*m.dead.order.at(i)]; ok {
			dead = append(dead, *m.dead.order.at(i))
		}
	}
	var mdead []uint64
	for _, d := range mod.dead {
		mdead = append(mdead, d.x.id)
	}
	if !slices.Equal(dead, mdead) {
		t.Fatalf("dead letters %v, model %v", dead, mdead)
	}
	var waiting, mwaiting []mwait
	for _, w := range m.delayed.q {
		waiting = append(waiting, mwait{w.at, mmsg{id: w.x.index, size: w.x.size, prio: w.x.priority, expiry: w.x.expiry, dc: w.x.delivery, ac: w.x.acquired}})
	}
	mwaiting = slices.Clone(mod.waiting)
	slices.SortFunc(mwaiting, func(a, b mwait) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmp.Compare(a.x.id, b.x.id)
	})
	if !slices.Equal(waiting, mwaiting) {
		t.Fatalf("delayed %v, model %v", waiting, mwaiting)
	}
	if live, want := m.AppendLiveIndexes(nil), mod.live(); !slices.Equal(live, want) {
		t.Fatalf("live %v, model %v", live, want)
	}
	if least, ok := m.SmallestLiveIndex(); ok != (len(mod.live()) > 0) || (ok && least != mod.live()[0]) {
		t.Fatalf("smallest live %d %v, model %v", least, ok, mod.live())
	}
	if got, want := m.Stats(), mod.stats(); got != want {
		t.Fatalf("stats %+v, model %+v", got, want)
	}
	at, ok := m.NextDeadline()
	wat, wok := mod.nextDeadline()
	if at != wat || ok != wok {
		t.Fatalf("next deadline %d %v, model %d %v", at, ok, wat, wok)
	}
	if m.Clock() != mod.clock || m.DeleteRequested() != mod.deleteRequested {
		t.Fatalf("clock %d delete %v, model %d %v", m.Clock(), m.DeleteRequested(), mod.clock, mod.deleteRequested)
	}
	if h.shadow != nil && !bytes.Equal(h.shadow.AppendSnapshot(nil), m.AppendSnapshot(nil)) {
		t.Fatalf("the restored machine's state differs")
	}
}

// The reference model.

type mmsg struct {
	id     uint64
	size   uint32
	prio   uint8
	expiry int64
	dc, ac uint32
}

func (x mmsg) expired(now int64) bool { return x.expiry != 0 && now >= x.expiry }

func (x mmsg) toMsg() msg {
	return msg{index: x.id, expiry: x.expiry, size: x.size, delivery: x.dc, acquired: x.ac, priority: x.prio}
}

type mheld struct {
	x        mmsg
	owner    ConsumerID
	deadline int64
	delivery uint64 // which handing-out: Effect.Delivery
}

type mcons struct {
	id                                     ConsumerID
	since                                  uint64
	getter, attached, exclusive, quiescing bool
	suspended                              bool
	prefetch                               uint32
	prio                                   int32
	timeout, lastDeadline                  int64
	order                                  []uint64 // held, delivery order
}

func (c *mcons) canReceive() bool {
	return c.attached && !c.quiescing && !c.suspended && len(c.order) < int(c.prefetch)
}

func (c *mcons) credit() int { return max(0, int(c.prefetch)-len(c.order)) }

type mwait struct {
	at int64
	x  mmsg
}

type mdead struct {
	x      mmsg
	reason Reason
}

type mpub struct {
	next     uint64
	rejected []uint64 // every refused sequence number, in order
}

type model struct {
	cfg               Config
	version           uint32
	clock, lastActive int64
	deleteRequested   bool

	returns []mmsg
	levels  [32][]mmsg
	waiting []mwait // returned, waiting out a delayed retry, in no order
	held    map[uint64]*mheld
	cons    map[ConsumerID]*mcons
	lines   map[int32][]ConsumerID // competing consumers able to receive, in turn order
	active  ConsumerID
	dead    []mdead
	pubs    map[uint64]*mpub

	deliveries uint64 // handings-out so far

	stored []uint64          // every message ever stored
	gone   map[uint64]Reason // and why each one left
	out    []Effect
}

func newModel(cfg Config, created int64) *model {
	return &model{
		cfg: cfg, version: 1, clock: created, lastActive: created,
		held: map[uint64]*mheld{}, cons: map[ConsumerID]*mcons{}, lines: map[int32][]ConsumerID{},
		pubs: map[uint64]*mpub{}, gone: map[uint64]Reason{},
	}
}

func (m *model) emit(e Effect) { m.out = append(m.out, e) }

func (m *model) apply(t *rapid.T, index uint64, c *Command) []Effect {
	m.out = nil
	m.clock = max(m.clock, c.Now)
	// Waiting messages whose time has come are returned first, in the
	// order of their times (then IDs).
	var due, still []mwait
	for _, w := range m.waiting {
		if w.at <= m.clock {
			due = append(due, w)
		} else {
			still = append(still, w)
		}
	}
	slices.SortFunc(due, func(a, b mwait) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmp.Compare(a.x.id, b.x.id)
	})
	for _, w := range due {
		m.returns = append(m.returns, w.x)
	}
	m.waiting = still
	switch c.Op {
	case OpEnqueue:
		m.enqueue(index, c)
	case OpPublisherDown:
		delete(m.pubs, c.Publisher)
	case OpAttach:
		m.attach(index, c)
	case OpDetach:
		if k := m.cons[c.Consumer]; k != nil && k.attached {
			m.unattach(k)
			m.forgetIfIdle(k)
			m.activate()
		}
	case OpUpgrade:
		m.version = max(m.version, c.Version)
	case OpSuspend:
		// Attached, it keeps its place and messages but gets nothing;
		// before machine version 2 nothing changes.
		if k := m.cons[c.Consumer]; m.version >= VersionSuspend && k != nil && k.attached && !k.suspended {
			k.suspended = true
			m.leaveLine(k)
			m.activate()
		}
	case OpConsumerDown:
		if k := m.cons[c.Consumer]; k != nil {
			if k.attached {
				m.unattach(k)
			}
			for _, id := range slices.Clone(k.order) {
				m.putBack(m.take(k, id), ReturnConsumerGone)
			}
			m.forgetIfIdle(k)
			m.activate()
		}
	case OpSettle, OpReturn, OpDiscard:
		k := m.cons[c.Consumer]
		if k == nil {
			break
		}
		for _, id := range c.IDs {
			h := m.held[id]
			if h == nil || h.owner != k.id {
				continue
			}
			x := m.take(k, id)
			switch c.Op {
			case OpSettle:
				m.gone[id] = ReasonSettled
			case OpReturn:
				m.putBack(x, c.Cause)
			case OpDiscard:
				if c.Cause.failed() {
					x.dc++
				}
				m.deadLetter(x, ReasonRejected)
			}
		}
		m.afterTake(k)
	case OpPurge:
		n := len(m.readyIDs()) + len(m.waiting) + len(m.dead)
		for _, id := range m.readyIDs() {
			m.gone[id] = ReasonPurged
		}
		for _, w := range m.waiting {
			m.gone[w.x.id] = ReasonPurged
		}
		for _, d := range m.dead {
			m.gone[d.x.id] = ReasonPurged
		}
		m.returns, m.levels, m.waiting, m.dead = nil, [32][]mmsg{}, nil, nil
		m.emit(Effect{Kind: EffectPurged, Count: uint32(n)})
	case OpGet:
		m.get(index, c)
	case OpTick:
		m.expire()
		m.timeouts()
		if m.cfg.Expires >= 0 && !m.deleteRequested && len(m.cons) == 0 && m.clock > m.lastActive+m.cfg.Expires {
			m.deleteRequested = true
			m.emit(Effect{Kind: EffectDeleteQueue})
		}
	case OpDeadLetterSettled:
		for _, id := range c.IDs {
			for i, d := range m.dead {
				if d.x.id == id {
					m.dead = slices.Delete(m.dead, i, i+1)
					m.gone[id] = ReasonSettled
					break
				}
			}
		}
	case OpTouch:
		m.lastActive = m.clock
	case OpUpdateConfig:
		// Limits and overflow apply at once (by the drop-head below), the
		// TTL to new messages, the delivery limit at the next return, the
		// consumer timeout to new consumers; the lease is kept, single
		// active consumer never changes; leaving at-least-once deletes
		// the pending dead letters.
		next := c.Config
		next.SingleActiveConsumer = m.cfg.SingleActiveConsumer
		kept := func(c Config) bool { return c.DeadLettering && c.Strategy == AtLeastOnce }
		if kept(m.cfg) && !kept(next) {
			for _, d := range m.dead {
				m.emit(Effect{Kind: EffectDrop, Reason: d.reason, Index: d.x.id,
					DeliveryCount: d.x.dc, AcquiredCount: d.x.ac, Time: m.clock})
				m.gone[d.x.id] = d.reason
			}
			m.dead = nil
		}
		m.cfg = next
	default:
		t.Fatalf("model: op %s", c.Op)
	}
	m.dispatch(t)
	if m.cfg.Overflow == DropHead {
		for m.readyLen() > 0 && m.overLimit(0, 0) {
			m.deadLetter(m.popHead(), ReasonMaxLen)
			if m.readyLen() > 0 && m.head().expired(m.clock) {
				m.expire()
			}
		}
	}
	return m.out
}

func (m *model) enqueue(index uint64, c *Command) {
	var p *mpub
	if c.Publisher != 0 {
		p = m.pubs[c.Publisher]
		if p == nil {
			p = &mpub{next: 1} // stored once its first publish is
		}
		if c.Seq != p.next {
			kind := EffectConfirm
			if c.Seq > p.next {
				m.emit(Effect{Kind: EffectOutOfSequence, Publisher: c.Publisher, Seq: c.Seq, Index: p.next})
				return
			}
			if m.rememberedRejection(p, c.Seq) {
				kind = EffectReject
			}
			m.emit(Effect{Kind: kind, Publisher: c.Publisher, Seq: c.Seq})
			return
		}
		m.pubs[c.Publisher] = p
		p.next = c.Seq + 1
	}
	if m.cfg.Overflow == RejectPublish && m.overLimit(1, int64(c.Size)) {
		if p != nil {
			p.rejected = append(p.rejected, c.Seq)
			m.emit(Effect{Kind: EffectReject, Publisher: c.Publisher, Seq: c.Seq})
		}
		return
	}
	x := mmsg{id: index, size: c.Size, prio: 4}
	if c.HasPriority {
		x.prio = min(c.Priority, 31)
	}
	ttl := int64(math.MaxInt64)
	if m.cfg.MessageTTL >= 0 {
		ttl = m.cfg.MessageTTL
	}
	if c.HasTTL {
		ttl = min(ttl, c.TTL)
	}
	if ttl != math.MaxInt64 {
		x.expiry = m.clock + max(ttl, 1)
	}
	m.levels[x.prio] = append(m.levels[x.prio], x)
	m.stored = append(m.stored, index)
	if p != nil {
		m.emit(Effect{Kind: EffectConfirm, Publisher: c.Publisher, Seq: c.Seq})
	}
}

// rememberedRejection: the machine remembers the refused sequence numbers
// of a publisher's last 8 runs of consecutive refusals.
func (m *model) rememberedRejection(p *mpub, seq uint64) bool {
	runs := 0
	for i := len(p.rejected) - 1; i >= 0 && runs < maxRejectedRanges; i-- {
		if i == len(p.rejected)-1 || p.rejected[i]+1 != p.rejected[i+1] {
			runs++
		}
		if p.rejected[i] == seq {
			return true
		}
	}
	return false
}

func (m *model) attach(index uint64, c *Command) {
	k := m.cons[c.Consumer]
	if k != nil && k.getter {
		m.emit(Effect{Kind: EffectConsumerRefused, Consumer: c.Consumer, Reason: ReasonIDInUse})
		return
	}
	for _, o := range m.cons {
		if o != k && o.attached && (o.exclusive || c.Exclusive) {
			m.emit(Effect{Kind: EffectConsumerRefused, Consumer: c.Consumer, Reason: ReasonExclusive})
			return
		}
	}
	if k != nil && c.Resume {
		for _, id := range slices.Clone(k.order) {
			if m.held[id].delivery > c.LastDelivery {
				m.putBack(m.take(k, id), ReturnNack)
			}
		}
	}
	if k == nil {
		k = &mcons{id: c.Consumer, since: index}
		m.cons[k.id] = k
	}
	m.leaveLine(k)
	k.attached, k.quiescing, k.suspended, k.exclusive, k.prio = true, false, false, c.Exclusive, c.ConsumerPriority
	k.prefetch = c.Prefetch
	if k.prefetch == 0 {
		k.prefetch = UnlimitedPrefetch
	}
	k.timeout = m.cfg.ConsumerTimeout
	if c.HasTimeout {
		k.timeout = c.Timeout
	}
	if m.cfg.SingleActiveConsumer {
		m.activate()
		return
	}
	m.offer(k)
}

func (m *model) leaveLine(k *mcons) {
	for p, line := range m.lines {
		m.lines[p] = slices.DeleteFunc(line, func(id ConsumerID) bool { return id == k.id })
	}
}

func (m *model) offer(k *mcons) {
	if m.cfg.SingleActiveConsumer || !k.canReceive() || slices.Contains(m.lines[k.prio], k.id) {
		return
	}
	m.lines[k.prio] = append(m.lines[k.prio], k.id)
}

func (m *model) unattach(k *mcons) {
	k.attached, k.quiescing, k.suspended = false, false, false
	m.leaveLine(k)
	if m.active == k.id {
		m.active = 0
	}
}

func (m *model) forgetIfIdle(k *mcons) {
	if !k.attached && len(k.order) == 0 {
		delete(m.cons, k.id)
		m.lastActive = m.clock
	}
}

func (m *model) activate() {
	if !m.cfg.SingleActiveConsumer {
		return
	}
	var best *mcons
	for _, k := range m.cons {
		if !k.attached || k.id == m.active {
			continue
		}
		if best == nil || (k.suspended != best.suspended && !k.suspended) || (k.suspended == best.suspended && (k.prio > best.prio ||
			(k.prio == best.prio && (k.credit() > best.credit() || (k.credit() == best.credit() && k.since < best.since))))) {
			best = k
		}
	}
	a := m.cons[m.active]
	switch {
	case best == nil:
		if a != nil {
			a.quiescing = false
		}
	case a == nil:
		m.active = best.id
		m.emit(Effect{Kind: EffectActive, Consumer: best.id, Active: true})
	case best.suspended || best.prio <= a.prio:
		a.quiescing = false
	case len(a.order) == 0:
		a.quiescing = false
		m.active = best.id
		m.emit(Effect{Kind: EffectActive, Consumer: a.id, Active: false})
		m.emit(Effect{Kind: EffectActive, Consumer: best.id, Active: true})
	default:
		a.quiescing = true
	}
}

func (m *model) take(k *mcons, id uint64) mmsg {
	h := m.held[id]
	delete(m.held, id)
	k.order = slices.DeleteFunc(k.order, func(x uint64) bool { return x == id })
	return h.x
}

func (m *model) afterTake(k *mcons) {
	if m.active == k.id && k.quiescing && len(k.order) == 0 {
		k.quiescing = false
		m.active = 0
		m.emit(Effect{Kind: EffectActive, Consumer: k.id, Active: false})
		m.activate()
	}
	m.forgetIfIdle(k)
	if m.cons[k.id] == k {
		m.offer(k)
	}
}

func (m *model) putBack(x mmsg, cause ReturnCause) {
	if cause == ReturnReject || cause == ReturnConsumerGone {
		x.dc++
	}
	if m.cfg.DeliveryLimit >= 0 && int64(x.dc) > m.cfg.DeliveryLimit {
		m.deadLetter(x, ReasonDeliveryLimit)
		return
	}
	failed := cause == ReturnReject || cause == ReturnConsumerGone
	r := m.cfg.Retry
	if r.Type == RetryAll || r.Type == RetryFailed && failed || r.Type == RetryReturned && !failed {
		m.waiting = append(m.waiting, mwait{m.clock + min(r.Min*max(int64(x.dc), 1), r.Max), x})
		return
	}
	m.returns = append(m.returns, x)
}

func (m *model) deadLetter(x mmsg, r Reason) {
	e := Effect{Kind: EffectDeadLetter, Reason: r, Index: x.id, DeliveryCount: x.dc, AcquiredCount: x.ac, Time: m.clock}
	switch {
	case !m.cfg.DeadLettering:
		e.Kind = EffectDrop
		m.gone[x.id] = r
	case m.cfg.Strategy == AtLeastOnce && r != ReasonMaxLen:
		e.AtLeastOnce = true
		m.dead = append(m.dead, mdead{x, r})
	default:
		m.gone[x.id] = r
	}
	m.emit(e)
}

func (m *model) get(index uint64, c *Command) {
	if m.cfg.SingleActiveConsumer {
		m.emit(Effect{Kind: EffectGetEmpty, Consumer: c.Consumer})
		return
	}
	m.lastActive = m.clock
	k := m.cons[c.Consumer]
	if k != nil && !k.getter {
		m.emit(Effect{Kind: EffectGetEmpty, Consumer: c.Consumer})
		return
	}
	if m.readyLen() > 0 && m.head().expired(m.clock) {
		m.expire()
	}
	if m.readyLen() == 0 {
		m.emit(Effect{Kind: EffectGetEmpty, Consumer: c.Consumer})
		return
	}
	x := m.popHead()
	before := x.ac
	x.ac++
	if c.NoAck {
		m.gone[x.id] = ReasonSettled
	} else {
		if k == nil {
			k = &mcons{id: c.Consumer, since: index, getter: true, timeout: m.cfg.ConsumerTimeout}
			m.cons[k.id] = k
		}
		m.hold(k, x)
	}
	var delivery uint64
	if !c.NoAck {
		delivery = m.deliveries
	}
	m.emit(Effect{Kind: EffectGetResult, Consumer: c.Consumer, Index: x.id, Delivery: delivery, Redelivered: before > 0,
		DeliveryCount: x.dc, AcquiredCount: before, Count: uint32(m.readyLen())})
}

func (m *model) hold(k *mcons, x mmsg) {
	m.deliveries++
	deadline := max(addSat(m.clock, k.timeout), k.lastDeadline)
	k.lastDeadline = deadline
	m.held[x.id] = &mheld{x: x, owner: k.id, deadline: deadline, delivery: m.deliveries}
	k.order = append(k.order, x.id)
}

func (m *model) timeouts() {
	for _, id := range slices.Sorted(maps.Keys(m.cons)) {
		k := m.cons[id]
		var due []uint64
		for _, hid := range k.order {
			if m.held[hid].deadline <= m.clock {
				due = append(due, hid)
			} else {
				break
			}
		}
		if len(due) == 0 {
			continue
		}
		if k.attached {
			m.emit(Effect{Kind: EffectCancelConsumer, Consumer: k.id, Reason: ReasonConsumerTimeout})
			m.unattach(k)
		} else if k.getter {
			m.emit(Effect{Kind: EffectCancelConsumer, Consumer: k.id, Reason: ReasonConsumerTimeout})
		}
		for _, hid := range due {
			m.putBack(m.take(k, hid), ReturnTimeout)
		}
		m.afterTake(k)
	}
	m.activate()
}

func (m *model) readyLen() int {
	n := len(m.returns)
	for _, lv := range m.levels {
		n += len(lv)
	}
	return n
}

func (m *model) readyIDs() []uint64 {
	var ids []uint64
	for _, x := range m.readyMsgs() {
		ids = append(ids, x.id)
	}
	return ids
}

// readyMsgs is the ready messages in serving order.
func (m *model) readyMsgs() []mmsg {
	out := slices.Clone(m.returns)
	for p := 31; p >= 0; p-- {
		out = append(out, m.levels[p]...)
	}
	return out
}

func (m *model) head() mmsg {
	if len(m.returns) > 0 {
		return m.returns[0]
	}
	for p := 31; p >= 0; p-- {
		if len(m.levels[p]) > 0 {
			return m.levels[p][0]
		}
	}
	panic("empty")
}

func (m *model) popHead() mmsg {
	if len(m.returns) > 0 {
		x := m.returns[0]
		m.returns = m.returns[1:]
		return x
	}
	for p := 31; p >= 0; p-- {
		if len(m.levels[p]) > 0 {
			x := m.levels[p][0]
			m.levels[p] = m.levels[p][1:]
			return x
		}
	}
	panic("empty")
}

func (m *model) expire() {
	for len(m.returns) > 0 && m.returns[0].expired(m.clock) {
		x := m.returns[0]
		m.returns = m.returns[1:]
		m.deadLetter(x, ReasonExpired)
	}
	for p := 31; p >= 0; p-- {
		for len(m.levels[p]) > 0 && m.levels[p][0].expired(m.clock) {
			x := m.levels[p][0]
			m.levels[p] = m.levels[p][1:]
			m.deadLetter(x, ReasonExpired)
		}
	}
}

func (m *model) nextConsumer() *mcons {
	if m.cfg.SingleActiveConsumer {
		if a := m.cons[m.active]; a != nil && a.canReceive() {
			return a
		}
		return nil
	}
	prios := slices.Sorted(maps.Keys(m.lines))
	for i := len(prios) - 1; i >= 0; i-- {
		if line := m.lines[prios[i]]; len(line) > 0 {
			m.lines[prios[i]] = line[1:]
			return m.cons[line[0]]
		}
	}
	return nil
}

func (m *model) dispatch(t *rapid.T) {
	for m.readyLen() > 0 {
		if m.head().expired(m.clock) {
			m.expire()
			continue
		}
		k := m.nextConsumer()
		if k == nil {
			return
		}
		if !k.canReceive() {
			t.Fatalf("model: consumer %d chosen without credit", k.id)
		}
		x := m.popHead()
		before := x.ac
		x.ac++
		m.hold(k, x)
		m.emit(Effect{Kind: EffectDeliver, Consumer: k.id, Index: x.id, Delivery: m.deliveries, Redelivered: before > 0,
			DeliveryCount: x.dc, AcquiredCount: before})
		m.offer(k)
	}
}

func (m *model) overLimit(n int, size int64) bool {
	count := int64(m.readyLen() + len(m.waiting) + len(m.dead) + n)
	bytes := size
	for _, w := range m.waiting {
		bytes += int64(w.x.size)
	}
	for _, x := range m.returns {
		bytes += int64(x.size)
	}
	for _, lv := range m.levels {
		for _, x := range lv {
			bytes += int64(x.size)
		}
	}
	for _, d := range m.dead {
		bytes += int64(d.x.size)
	}
	return (m.cfg.MaxLength >= 0 && count > m.cfg.MaxLength) || (m.cfg.MaxLengthBytes >= 0 && bytes > m.cfg.MaxLengthBytes)
}

func (m *model) live() []uint64 {
	ids := m.readyIDs()
	for id := range m.held {
		ids = append(ids, id)
	}
	for _, d := range m.dead {
		ids = append(ids, d.x.id)
	}
	for _, w := range m.waiting {
		ids = append(ids, w.x.id)
	}
	slices.Sort(ids)
	return ids
}

func (m *model) stats() Stats {
	s := Stats{Ready: m.readyLen(), Unacked: len(m.held), DeadLettered: len(m.dead)}
	for _, x := range m.returns {
		s.ReadyBytes += int64(x.size)
	}
	for _, lv := range m.levels {
		for _, x := range lv {
			s.ReadyBytes += int64(x.size)
		}
	}
	for _, d := range m.dead {
		s.DeadLetteredBytes += int64(d.x.size)
	}
	s.Delayed = len(m.waiting)
	for _, w := range m.waiting {
		s.DelayedBytes += int64(w.x.size)
	}
	for _, k := range m.cons {
		if k.attached {
			s.Consumers++
		}
	}
	return s
}

func (m *model) nextDeadline() (int64, bool) {
	var ts []int64
	if len(m.returns) > 0 && m.returns[0].expiry != 0 {
		ts = append(ts, m.returns[0].expiry)
	}
	for _, lv := range m.levels {
		if len(lv) > 0 && lv[0].expiry != 0 {
			ts = append(ts, lv[0].expiry)
		}
	}
	for _, k := range m.cons {
		if len(k.order) > 0 {
			ts = append(ts, m.held[k.order[0]].deadline)
		}
	}
	if m.cfg.Expires >= 0 && !m.deleteRequested && len(m.cons) == 0 {
		ts = append(ts, m.lastActive+m.cfg.Expires+1)
	}
	for _, w := range m.waiting {
		ts = append(ts, w.at)
	}
	if len(ts) == 0 {
		return math.MaxInt64, false
	}
	return slices.Min(ts), true
}

// checkPlaces: every message ever stored is in exactly one place, or gone
// with a reason.
func (m *model) checkPlaces() error {
	places := map[uint64]int{}
	for _, id := range m.readyIDs() {
		places[id]++
	}
	for id, h := range m.held {
		if k := m.cons[h.owner]; k == nil || !slices.Contains(k.order, id) {
			return fmt.Errorf("model: m%d held by %d, which does not list it", id, h.owner)
		}
		places[id]++
	}
	for _, d := range m.dead {
		places[d.x.id]++
	}
	for _, w := range m.waiting {
		places[w.x.id]++
	}
	for _, id := range m.stored {
		_, gone := m.gone[id]
		if n := places[id]; n > 1 || (n == 1) == gone {
			return fmt.Errorf("m%d is in %d places, gone=%v (%v)", id, n, gone, m.gone[id])
		}
	}
	return nil
}
