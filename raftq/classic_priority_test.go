package raftq

import (
	"slices"
	"testing"
)

// TestClassicPriority checks the classic-queue priority mode: unset
// priority is 0, priorities are capped at MaxPriority, and without
// x-max-priority the queue is FIFO whatever the property says.
func TestClassicPriority(t *testing.T) {
	type pub struct {
		prio uint8
		has  bool
	}
	pubs := []pub{{0, false}, {5, true}, {9, true}, {3, true}, {0, false}, {200, true}, {1, true}}
	order := func(cfg Config) []uint64 {
		m := New(cfg, 0)
		var idx uint64
		for _, p := range pubs {
			idx++
			m.Apply(Meta{Index: idx}, &Command{Op: OpEnqueue, Size: 1, Priority: p.prio, HasPriority: p.has}, nil)
		}
		var got []uint64
		for range pubs {
			idx++
			for _, e := range m.Apply(Meta{Index: idx}, &Command{Op: OpGet, Consumer: 1, NoAck: true}, nil) {
				if e.Kind == EffectGetResult {
					got = append(got, e.Index)
				}
			}
		}
		return got
	}
	cfg := DefaultConfig()
	cfg.ClassicPriority = true
	if got, want := order(cfg), []uint64{1, 2, 3, 4, 5, 6, 7}; !slices.Equal(got, want) {
		t.Errorf("no x-max-priority: got %v, want FIFO %v", got, want)
	}
	cfg.MaxPriority = 5
	// Levels: 0,5,5,3,0,5,1 → 5s in order (2,3,6), then 3 (4), 1 (7), 0s (1,5).
	if got, want := order(cfg), []uint64{2, 3, 6, 4, 7, 1, 5}; !slices.Equal(got, want) {
		t.Errorf("x-max-priority 5: got %v, want %v", got, want)
	}
	cfg.MaxPriority = 255
	// Levels capped at 31: 0,5,9,3,0,31,1.
	if got, want := order(cfg), []uint64{6, 3, 2, 4, 7, 1, 5}; !slices.Equal(got, want) {
		t.Errorf("x-max-priority 255: got %v, want %v", got, want)
	}
	// Quorum mode is unchanged: unset counts as 4.
	if got, want := order(DefaultConfig()), []uint64{6, 3, 2, 1, 5, 4, 7}; !slices.Equal(got, want) {
		t.Errorf("quorum: got %v, want %v", got, want)
	}
}
