package node

import (
	"slices"
	"testing"
)

// TestRecordBootKeepsTheLatest: each start returns the boots before it,
// the latest maxPreviousBoots of them, oldest first.
func TestRecordBootKeepsTheLatest(t *testing.T) {
	dir := t.TempDir()
	boots := []string{"a", "b", "c", "d"}
	for i, b := range boots {
		prev, err := recordBoot(dir, b)
		if err != nil {
			t.Fatal(err)
		}
		want := boots[max(0, i-maxPreviousBoots):i]
		if !slices.Equal(prev, want) {
			t.Fatalf("start %s: previous %q, want %q", b, prev, want)
		}
	}
}
