package alarm

import (
	"log/slog"
	"runtime"
	"testing"
)

// gauge is a watermark over observed memory, recording what it was fed.
type gauge struct {
	limit int64
	seen  []int64
}

func (g *gauge) Limit() int64        { return g.limit }
func (g *gauge) Observe(inUse int64) { g.seen = append(g.seen, inUse) }

// TestProcessMemoryFollowsTheHeap checks the measure against what the
// test allocates: 256 MiB held show, and are gone once collected.
func TestProcessMemoryFollowsTheHeap(t *testing.T) {
	runtime.GC()
	before := ProcessMemory()
	held := make([]byte, 256<<20)
	for i := 0; i < len(held); i += 4096 {
		held[i] = 1 // resident, as a queue's messages would be
	}
	during := ProcessMemory()
	runtime.KeepAlive(held)
	held = nil
	runtime.GC()
	after := ProcessMemory()
	if during-before < 250<<20 || during-after < 250<<20 {
		t.Fatalf("memory in use %d before, %d holding 256 MiB, %d after a collection", before, during, after)
	}
}

// TestMemoryMonitorCollectsWhenOver checks that a look at or above the
// watermark collects garbage and looks again before it feeds the gauge,
// so that memory no longer referenced neither raises nor keeps the alarm;
// one below it feeds the gauge as it is.
func TestMemoryMonitorCollectsWhenOver(t *testing.T) {
	runtime.GC()
	g := &gauge{limit: ProcessMemory() + 128<<20}
	m := &MemoryMonitor{gauge: g, sample: ProcessMemory, log: slog.New(slog.DiscardHandler)}

	m.Check()
	if len(g.seen) != 1 {
		t.Fatalf("%d looks below the watermark, want 1", len(g.seen))
	}

	garbage := make([]byte, 256<<20)
	for i := 0; i < len(garbage); i += 4096 {
		garbage[i] = 1
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	g.seen = nil
	m.Check()
	if len(g.seen) != 1 || g.seen[0] >= g.limit {
		t.Fatalf("fed %v against a watermark of %d, with 256 MiB of garbage: want one look, under it after a collection", g.seen, g.limit)
	}
}

func TestParseCgroupLimit(t *testing.T) {
	for in, want := range map[string]int64{"1073741824\n": 1 << 30, "max\n": 0, "": 0, "0": 0} {
		got, ok := parseCgroupLimit(in)
		if got != want || ok != (want > 0) {
			t.Errorf("parseCgroupLimit(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}
