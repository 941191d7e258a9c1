package linger

import (
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

// Items a millisecond apart with a 2 ms wait: the first goes at once
// (nothing came before it), the next ones are held in batches that gain
// company, and the policy keeps holding.
func TestHoldsSteadyItems(t *testing.T) {
	p := New(2 * time.Millisecond)
	if p.Arrive(at(0)) {
		t.Fatal("the first item after idle was held")
	}
	for round := range 10 {
		base := 1 + 2*float64(round)
		if !p.Arrive(at(base)) || !p.Arrive(at(base+1)) {
			t.Fatalf("round %d: steady items not held", round)
		}
		if p.Held() != 2 || !p.Due().Equal(at(base+2)) {
			t.Fatalf("round %d: held %d due %v", round, p.Held(), p.Due())
		}
		p.Release(true, at(base+2))
	}
}

// An item arriving after more than the wait goes at once.
func TestSlowItemsGoAtOnce(t *testing.T) {
	p := New(2 * time.Millisecond)
	for i := range 10 {
		if p.Arrive(at(float64(3 * i))) {
			t.Fatalf("item %d, 3 ms after the one before, held", i)
		}
	}
}

// A sender that waits for the answers to its window (one item, or four
// sent at once) before the next: its holds gain nothing, and after Misses
// of them nothing is held for Rest (so it runs as fast as unheld); then
// holding starts again.
func TestMissesRest(t *testing.T) {
	const answer = 0.3 // ms from an item's send to its answer
	for _, window := range []int{1, 4} {
		p := New(2 * time.Millisecond)
		now, heldRounds := 0.0, 0
		for range 200 { // about 100 ms
			held := false
			for range window {
				held = p.Arrive(at(now)) || held
			}
			if held {
				heldRounds++
				now = float64(p.Due().Sub(t0)) / float64(time.Millisecond)
				p.Release(true, at(now))
			}
			now += answer
		}
		if heldRounds > Misses {
			t.Fatalf("window %d: %d of 200 rounds held, want at most %d", window, heldRounds, Misses)
		}
		now += float64(Rest / time.Millisecond)
		p.Arrive(at(now))
		if !p.Arrive(at(now + 0.5)) {
			t.Fatalf("window %d: not held after the rest", window)
		}
	}
}

// A batch that filled, or that an operation sent, does not count as a
// miss however little it gained.
func TestOnlyExpiredHoldsMiss(t *testing.T) {
	p := New(2 * time.Millisecond)
	p.Arrive(at(0))
	for i := range 10 * Misses {
		now := 1 + 0.1*float64(i)
		if !p.Arrive(at(now)) {
			t.Fatalf("item %d not held: early sends counted as misses", i)
		}
		p.Release(false, at(now))
	}
}

func TestFull(t *testing.T) {
	p := New(time.Second)
	p.Arrive(at(0))
	for i := range Batch {
		if p.Full() {
			t.Fatalf("full at %d held", i)
		}
		p.Arrive(at(0.01 * float64(i+1)))
	}
	if !p.Full() {
		t.Fatal("not full with Batch held")
	}
}

func TestZeroWaitHoldsNothing(t *testing.T) {
	p := New(0)
	for i := range 5 {
		if p.Arrive(at(0.01 * float64(i))) {
			t.Fatal("held with no wait")
		}
	}
}

// SetWait changes the hold for items arriving while none is held; held
// items keep theirs (a publish arriving amid held ones must join them).
func TestSetWaitBetweenHolds(t *testing.T) {
	p := New(0)
	if p.Arrive(at(0)) || p.Arrive(at(0.5)) {
		t.Fatal("held with no wait")
	}
	p.SetWait(2 * time.Millisecond)
	if !p.Arrive(at(1)) {
		t.Fatal("not held after SetWait")
	}
	p.SetWait(0)
	if p.Wait() != 2*time.Millisecond || !p.Arrive(at(1.5)) {
		t.Fatal("SetWait(0) with items held let the next one pass them")
	}
	p.Release(true, at(3))
	p.SetWait(0)
	if p.Wait() != 0 || p.Arrive(at(3.5)) {
		t.Fatal("SetWait(0) between holds did not stop the holding")
	}
}

// SetBatch(2) sends a pair as soon as the second arrives; it changes the
// batch only between holds, like SetWait.
func TestSetBatchPairs(t *testing.T) {
	p := New(2 * time.Millisecond)
	p.SetBatch(2)
	p.Arrive(at(0))
	if !p.Arrive(at(0.5)) || p.Full() {
		t.Fatal("the first of a pair was not held, or was full alone")
	}
	p.SetBatch(16) // ignored: one is held
	if !p.Arrive(at(0.6)) || !p.Full() {
		t.Fatal("a pair was not full")
	}
	p.Release(false, at(0.6))
	p.SetBatch(16)
	for i := range 15 {
		p.Arrive(at(0.7 + 0.01*float64(i)))
		if p.Full() {
			t.Fatalf("full at %d held after SetBatch(16)", i+1)
		}
	}
	p.SetBatch(1)
	p.Release(false, at(1))
	p.SetBatch(1) // at least 2: one held alone is never full
	p.Arrive(at(1.1))
	if p.Full() {
		t.Fatal("SetBatch(1) made one held item full")
	}
}
