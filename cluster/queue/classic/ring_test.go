package classic

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRingBehavesLikeASlice drives a ring and a plain slice with the same
// random pushes and pops, across growth, wrap-around and shrinking.
func TestRingBehavesLikeASlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r ring[int]
	var want []int
	next := 0
	for step := 0; step < 100000; step++ {
		// Phases of mostly pushing then mostly popping exercise both
		// growing and shrinking.
		pushBias := 7
		if (step/5000)%2 == 1 {
			pushBias = 3
		}
		switch n := rng.IntN(10); {
		case n < pushBias:
			r.push(next)
			want = append(want, next)
			next++
		case n < 9:
			got, ok := r.pop()
			if ok != (len(want) > 0) || (ok && got != want[0]) {
				t.Fatalf("step %d: pop = (%d, %v), want front of %v", step, got, ok, want[:min(3, len(want))])
			}
			if ok {
				want = want[1:]
			}
		default:
			if len(want) == 0 {
				continue
			}
			victim := want[rng.IntN(len(want))]
			if !r.removeFirst(func(v int) bool { return v == victim }) {
				t.Fatalf("step %d: removeFirst(%d) found nothing", step, victim)
			}
			want = slices.DeleteFunc(want, func(v int) bool { return v == victim })
		}
		if r.len() != len(want) {
			t.Fatalf("step %d: len = %d, want %d", step, r.len(), len(want))
		}
	}
	var got []int
	r.each(func(v int) { got = append(got, v) })
	if !slices.Equal(got, want) {
		t.Fatalf("each = %v, want %v", got, want)
	}
}

func TestRingShrinksAfterABurst(t *testing.T) {
	var r ring[int]
	for i := 0; i < 10000; i++ {
		r.push(i)
	}
	for r.len() > 0 {
		r.pop()
	}
	if len(r.buf) > minRingCap {
		t.Fatalf("empty ring kept a buffer of %d", len(r.buf))
	}
}

func TestReturnedHeapPopsInIDOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h returnedHeap
	var want []uint64
	for i := 0; i < 2000; i++ {
		if rng.IntN(3) > 0 || h.len() == 0 {
			id := rng.Uint64N(1 << 20)
			h.push(entry{id: id})
			want = append(want, id)
			continue
		}
		slices.Sort(want)
		if got := h.pop().id; got != want[0] {
			t.Fatalf("pop = %d, want %d", got, want[0])
		}
		want = want[1:]
	}
	slices.Sort(want)
	for _, w := range want {
		if got := h.pop().id; got != w {
			t.Fatalf("pop = %d, want %d", got, w)
		}
	}
}
