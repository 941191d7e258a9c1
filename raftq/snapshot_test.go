package raftq

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// busyMachine builds a queue with something in every place: publishers,
// consumers at several priorities (some detached, one a get owner),
// returned, prioritised and expiring messages, messages waiting out a
// delayed retry, and at-least-once dead letters. Maps are filled in varying orders from run to run by the Go
// runtime, which the snapshot must not show.
func busyMachine(t testing.TB) *Machine {
	cfg, err := ParseConfig(map[string]any{
		"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once",
		"x-overflow": "reject-publish", "x-max-length": int64(100), "x-message-ttl": int64(60_000),
		"x-delayed-retry-type": "failed", "x-delayed-retry-min": int64(100_000), "x-delayed-retry-max": int64(300_000),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := New(cfg, 1000)
	var index uint64
	apply := func(c Command) {
		index++
		c.Now = 1000 + int64(index)
		m.Apply(Meta{Index: index}, &c, nil)
	}
	for p := uint64(1); p <= 20; p++ {
		apply(Command{Op: OpEnqueue, Publisher: p, Seq: 1, Size: uint32(p), Priority: uint8(p % 7), HasPriority: p%2 == 0})
	}
	for c := ConsumerID(1); c <= 6; c++ {
		apply(Command{Op: OpAttach, Consumer: c, Prefetch: 2, ConsumerPriority: int32(c % 3)})
	}
	apply(Command{Op: OpDetach, Consumer: 2})
	apply(Command{Op: OpReturn, Consumer: 1, Cause: ReturnReject, IDs: m.heldBy(1)})   // delayed
	apply(Command{Op: OpReturn, Consumer: 4, Cause: ReturnNack, IDs: m.heldBy(4)[:1]}) // ready at once
	apply(Command{Op: OpDiscard, Consumer: 3, Cause: ReturnReject, IDs: m.heldBy(3)[:1]})
	apply(Command{Op: OpEnqueue, Publisher: 21, Seq: 1, TTL: 5, HasTTL: true})
	apply(Command{Op: OpGet, Consumer: 40})
	if err := checkInvariants(m); err != nil {
		t.Fatal(err)
	}
	if m.Stats().Delayed == 0 {
		t.Fatal("no message waits out a delayed retry")
	}
	return m
}

func (m *Machine) heldBy(id ConsumerID) []uint64 {
	var ids []uint64
	if c := m.consumers.byID[id]; c != nil {
		for i := 0; i < c.order.len(); i++ {
			if d := *c.order.at(i); m.checkouts.live(c, d) {
				ids = append(ids, d.index)
			}
		}
	}
	return ids
}

func TestSnapshotDeterministic(t *testing.T) {
	want := busyMachine(t).AppendSnapshot(nil)
	for i := 0; i < 20; i++ {
		if got := busyMachine(t).AppendSnapshot(nil); !bytes.Equal(got, want) {
			t.Fatal("the same state snapshots to different bytes")
		}
	}
	r, err := Restore(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkInvariants(r); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.AppendSnapshot(nil), want) {
		t.Fatal("a restored machine snapshots differently")
	}
}

func TestRestoreRefuses(t *testing.T) {
	good := busyMachine(t).AppendSnapshot(nil)
	v4 := append([]byte(snapshotMagic), 4)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("WARRENQX"), good[8:]...),
		"version 4": append(v4, good[len(snapshotMagic)+1:]...),
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 0),
	} {
		if _, err := Restore(b); !errors.Is(err, ErrSnapshot) {
			t.Errorf("%s: Restore = %v, want ErrSnapshot", name, err)
		}
	}
}

// TestRestoreReadsVersion1: a snapshot written before delayed retries
// (version 1: no delayed section, no retry in the config) restores, so a
// node upgraded over its data starts.
func TestRestoreReadsVersion1(t *testing.T) {
	cfg, err := ParseConfig(map[string]any{"x-max-length": int64(100)})
	if err != nil {
		t.Fatal(err)
	}
	m := New(cfg, 1000)
	for i := uint64(1); i <= 5; i++ {
		m.Apply(Meta{Index: i}, &Command{Op: OpEnqueue, Now: 1000, Publisher: 1, Seq: i, Size: 10}, nil)
	}
	v2 := m.AppendSnapshot(nil)
	if v2[len(snapshotMagic)] != 2 || v2[len(v2)-1] != 0 {
		t.Fatalf("version %d, last byte %d: not the layout this test knows", v2[len(snapshotMagic)], v2[len(v2)-1])
	}
	v1 := append([]byte{}, v2[:len(v2)-1]...) // without the (empty) delayed section
	v1[len(snapshotMagic)] = 1
	r, err := Restore(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.AppendSnapshot(nil), v2) || r.Stats() != m.Stats() {
		t.Fatal("the version 1 snapshot restored to another state")
	}
}

// FuzzRestore: Restore never panics, and a machine it accepts is
// consistent and snapshots back to bytes that restore to the same state.
func FuzzRestore(f *testing.F) {
	f.Add(busyMachine(f).AppendSnapshot(nil))
	f.Add(New(DefaultConfig(), 0).AppendSnapshot(nil))
	up := busyMachine(f)
	up.Apply(Meta{Index: up.LastIndex() + 1}, &Command{Op: OpUpgrade, Version: MachineVersion}, nil)
	f.Add(up.AppendSnapshot(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Restore(b)
		if err != nil {
			return
		}
		if err := checkStructure(m); err != nil {
			t.Fatalf("restored an inconsistent machine: %v", err)
		}
		snap := m.AppendSnapshot(nil)
		again, err := Restore(snap)
		if err != nil {
			t.Fatalf("re-snapshot does not restore: %v", err)
		}
		if !bytes.Equal(again.AppendSnapshot(nil), snap) {
			t.Fatal("snapshot is not stable")
		}
	})
}

// TestSnapshotMachineVersion: a queue at machine version 1 writes the
// snapshots builds without machine versions read (snapshot version 2,
// which has no suspended flag); once upgraded it writes version 3 with
// its machine version, restored as it was. A machine version this build
// does not apply, or a suspended consumer at version 1, is refused.
func TestSnapshotMachineVersion(t *testing.T) {
	m := busyMachine(t)
	if m.Version() != 1 {
		t.Fatalf("a new queue runs machine version %d, want 1", m.Version())
	}
	old := m.AppendSnapshot(nil)
	if old[len(snapshotMagic)] != 2 {
		t.Fatalf("at machine version 1 the snapshot is version %d, want 2", old[len(snapshotMagic)])
	}
	m.Apply(Meta{Index: m.LastIndex() + 1}, &Command{Op: OpUpgrade, Version: MachineVersion}, nil)
	snap := m.AppendSnapshot(nil)
	if snap[len(snapshotMagic)] != 3 || snap[len(snapshotMagic)+1] != MachineVersion {
		t.Fatalf("after the upgrade: snapshot version %d, machine version %d", snap[len(snapshotMagic)], snap[len(snapshotMagic)+1])
	}
	r, err := Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version() != MachineVersion || !bytes.Equal(r.AppendSnapshot(nil), snap) {
		t.Fatalf("restored at machine version %d, or to another state", r.Version())
	}
	for name, v := range map[string]byte{"newer": MachineVersion + 1, "1 in a version 3 snapshot": 1} {
		b := slices.Clone(snap)
		b[len(snapshotMagic)+1] = v
		if _, err := Restore(b); !errors.Is(err, ErrSnapshot) {
			t.Errorf("machine version %s: Restore = %v, want ErrSnapshot", name, err)
		}
	}

	// A suspended consumer cannot be in a version 1 state.
	s := New(DefaultConfig(), 0)
	s.Apply(Meta{Index: 1}, &Command{Op: OpUpgrade, Version: VersionSuspend}, nil)
	s.Apply(Meta{Index: 2}, &Command{Op: OpAttach, Consumer: 1, Prefetch: 1}, nil)
	s.Apply(Meta{Index: 3}, &Command{Op: OpSuspend, Consumer: 1}, nil)
	if got := s.AppendConsumers(nil); len(got) != 1 || got[0].Status != StatusSuspectedDown {
		t.Fatalf("consumers %+v, want c1 suspected down", got)
	}
	b := s.AppendSnapshot(nil)
	// Rewritten as version 2 (dropping the machine version), the flag is
	// refused.
	v2 := append(append([]byte(snapshotMagic), 2), b[len(snapshotMagic)+2:]...)
	if _, err := Restore(v2); !errors.Is(err, ErrSnapshot) {
		t.Errorf("a suspended consumer in a version 2 snapshot: Restore = %v, want ErrSnapshot", err)
	}
}
