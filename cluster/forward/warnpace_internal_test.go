package forward

import (
	"testing"
	"time"
)

// TestWarnPaceCountsWhatItHoldsBack: within warnPaceEvery of a line,
// counts are held back, and the next line says how many.
func TestWarnPaceCountsWhatItHoldsBack(t *testing.T) {
	var w warnPace
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at       time.Duration
		n        int
		heldBack int
		log      bool
	}{
		{0, 3, 0, true}, // the first goes at once
		{time.Second, 5, 0, false},
		{9 * time.Second, 1, 0, false},
		{10 * time.Second, 2, 6, true}, // says the 5 and 1 held back
		{11 * time.Second, 4, 0, false},
		{time.Minute, 1, 4, true},
	}
	for i, s := range steps {
		held, log := w.add(t0.Add(s.at), s.n)
		if held != s.heldBack || log != s.log {
			t.Fatalf("step %d: add(%v, %d) = %d, %v; want %d, %v", i, s.at, s.n, held, log, s.heldBack, s.log)
		}
	}
}
