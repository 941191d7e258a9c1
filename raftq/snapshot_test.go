package raftq

import (
	"bytes"
	"errors"
	"testing"
)

// busyMachine builds a queue with something in every place: publishers,
// consumers at several priorities (some detached, one a get owner),
// returned, prioritised and expiring messages, and at-least-once dead
// letters. Maps are filled in varying orders from run to run by the Go
// runtime, which the snapshot must not show.
func busyMachine(t testing.TB) *Machine {
	cfg, err := ParseConfig(map[string]any{
		"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once",
		"x-overflow": "reject-publish", "x-max-length": int64(100), "x-message-ttl": int64(60_000),
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
	apply(Command{Op: OpReturn, Consumer: 1, Cause: ReturnReject, IDs: m.heldBy(1)})
	apply(Command{Op: OpDiscard, Consumer: 3, Cause: ReturnReject, IDs: m.heldBy(3)[:1]})
	apply(Command{Op: OpEnqueue, Publisher: 21, Seq: 1, TTL: 5, HasTTL: true})
	apply(Command{Op: OpGet, Consumer: 40})
	if err := checkInvariants(m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *Machine) heldBy(id ConsumerID) []uint64 {
	var ids []uint64
	if c := m.consumers[id]; c != nil {
		for i := 0; i < c.order.len(); i++ {
			if d := *c.order.at(i); m.live(c, d) {
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
	v2 := append([]byte(snapshotMagic), 2)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("WARRENQX"), good[8:]...),
		"version 2": append(v2, good[len(snapshotMagic)+1:]...),
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 0),
	} {
		if _, err := Restore(b); !errors.Is(err, ErrSnapshot) {
			t.Errorf("%s: Restore = %v, want ErrSnapshot", name, err)
		}
	}
}

// FuzzRestore: Restore never panics, and a machine it accepts is
// consistent and snapshots back to bytes that restore to the same state.
func FuzzRestore(f *testing.F) {
	f.Add(busyMachine(f).AppendSnapshot(nil))
	f.Add(New(DefaultConfig(), 0).AppendSnapshot(nil))
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
