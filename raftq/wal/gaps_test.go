package wal

import "testing"

// A sparse log (live messages kept, the stretches between deleted) answers
// where its first missing entry in a range is, from the index alone.
func TestFirstGapInSparseLog(t *testing.T) {
	l := openT(t, t.TempDir(), 0)
	defer l.Close()
	g := groupT(t, l, "q")
	store(t, g, 1, 30)
	if err := g.DeleteRange(5, 9); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to uint64
		gap      uint64
		has      bool
	}{
		{1, 4, 0, false},
		{1, 30, 5, true},
		{10, 30, 0, false},
		{7, 30, 7, true},
		{10, 31, 31, true},
		{31, 40, 31, true},
		{20, 10, 0, false},
	} {
		gap, has := g.FirstGap(c.from, c.to)
		if gap != c.gap || has != c.has {
			t.Errorf("FirstGap(%d, %d) = %d, %v; want %d, %v", c.from, c.to, gap, has, c.gap, c.has)
		}
	}
	if !g.Has(4) || g.Has(5) || !g.Has(30) || g.Has(31) {
		t.Errorf("Has disagrees with the entries stored")
	}
}
