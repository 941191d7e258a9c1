package raftq

import (
	"runtime"
	"testing"
)

// BenchmarkApplyEnqueueDeliverSettle is a busy queue's steady state on one
// core: each op is one publish (a tracked publisher, so a confirm), its
// delivery to a consumer with prefetch 256, and its share of a settle of 64
// at a time (a client acking with multiple). Commands go through their log
// encoding, as the FSM adapter would feed them.
func BenchmarkApplyEnqueueDeliverSettle(b *testing.B) {
	m := New(DefaultConfig(), 0)
	var (
		index   uint64
		cmd     Command
		effects []Effect
		entry   []byte
		pending []uint64
	)
	apply := func(c *Command) {
		entry = c.Append(entry[:0])
		if err := Decode(entry, &cmd); err != nil {
			b.Fatal(err)
		}
		index++
		effects = m.Apply(Meta{Index: index}, &cmd, effects[:0])
	}
	apply(&Command{Op: OpAttach, Consumer: 1, Prefetch: 256})
	payload := make([]byte, 64)
	enq := Command{Op: OpEnqueue, Publisher: 1, Size: uint32(len(payload)), Payload: payload}
	settle := Command{Op: OpSettle, Consumer: 1, IDs: make([]uint64, 0, 64)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		enq.Seq = uint64(i + 1)
		enq.Now = int64(i)
		apply(&enq)
		for _, e := range effects {
			if e.Kind == EffectDeliver {
				pending = append(pending, e.Index)
			}
		}
		if len(pending) == 64 {
			settle.Now = int64(i)
			settle.IDs = append(settle.IDs[:0], pending...)
			apply(&settle)
			pending = pending[:0]
		}
	}
}

// BenchmarkApplyBacklog publishes into and consumes from a queue holding a
// backlog of 100,000 messages: the costs must not grow with it.
func BenchmarkApplyBacklog(b *testing.B) {
	m := New(DefaultConfig(), 0)
	var index uint64
	var effects []Effect
	enq := Command{Op: OpEnqueue, Size: 1024}
	for i := 0; i < 100_000; i++ {
		index++
		effects = m.Apply(Meta{Index: index}, &enq, effects[:0])
	}
	get := Command{Op: OpGet, Consumer: 9, NoAck: true}
	b.ReportAllocs()
	for b.Loop() {
		index++
		effects = m.Apply(Meta{Index: index}, &enq, effects[:0])
		index++
		effects = m.Apply(Meta{Index: index}, &get, effects[:0])
		if len(effects) != 1 || effects[0].Kind != EffectGetResult {
			b.Fatalf("get: %v", effects)
		}
	}
}

// BenchmarkSnapshot1M snapshots and restores a queue holding a million
// ready messages: the cost is the records', never the bodies'.
func BenchmarkSnapshot1M(b *testing.B) {
	m := backlog(1_000_000)
	var snap []byte
	b.ReportAllocs()
	for b.Loop() {
		snap = m.AppendSnapshot(snap[:0])
		if _, err := Restore(snap); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(snap))/1e6, "bytes/msg-in-snapshot")
}

func backlog(n int) *Machine {
	m := New(DefaultConfig(), 0)
	enq := Command{Op: OpEnqueue, Size: 1024, Now: 1}
	var out []Effect
	for i := 1; i <= n; i++ {
		out = m.Apply(Meta{Index: uint64(i)}, &enq, out[:0])
	}
	return m
}

// TestMemoryPerMessage: a million ready 1 KB messages cost the queue's
// state about 32 bytes each (the records in their ring buffers, which may
// be up to twice the size they need), not their bodies.
func TestMemoryPerMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a million records")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := backlog(1_000_000)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perMsg := float64(after.HeapAlloc-before.HeapAlloc) / 1e6
	t.Logf("%.1f heap bytes per ready message", perMsg)
	if perMsg > 80 {
		t.Errorf("%.1f bytes per message, want about 32", perMsg)
	}
	runtime.KeepAlive(m)
}
