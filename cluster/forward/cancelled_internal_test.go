package forward

import (
	"testing"

	"github.com/warrenmq/warren/raftq/queue"
)

// handle is a distinct queue.Consumer per value.
type handle struct {
	queue.Consumer
	n int
}

func TestCancelledSetForgetsTheOldestPastItsBound(t *testing.T) {
	s := newCancelledSet()
	hs := make([]*handle, maxCancelled+10)
	for i := range hs {
		hs[i] = &handle{n: i}
		s.add(hs[i], uint64(i+1))
	}
	if len(s.ids) != maxCancelled {
		t.Fatalf("holds %d, want %d", len(s.ids), maxCancelled)
	}
	if _, ok := s.take(hs[9]); ok {
		t.Fatal("the tenth oldest is still remembered past the bound")
	}
	if id, ok := s.take(hs[10]); !ok || id != 11 {
		t.Fatalf("take of the oldest kept: %d %v", id, ok)
	}
	if _, ok := s.take(hs[10]); ok {
		t.Fatal("taken twice")
	}
}

func TestCancelledSetCompactsTakenHandles(t *testing.T) {
	s := newCancelledSet()
	keep := &handle{n: -1}
	s.add(keep, 7)
	for i := range 1000 {
		h := &handle{n: i}
		s.add(h, uint64(i))
		s.take(h)
	}
	if len(s.order) > 2*len(s.ids)+16 {
		t.Fatalf("order holds %d handles for %d remembered", len(s.order), len(s.ids))
	}
	if id, ok := s.take(keep); !ok || id != 7 {
		t.Fatalf("the one kept: %d %v", id, ok)
	}
}
