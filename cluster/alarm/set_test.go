package alarm

import (
	"slices"
	"testing"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSetLocalAndRemote(t *testing.T) {
	s := NewSet("n1", nil)
	if reason, ch := s.Blocking(); reason != "" || ch != nil {
		t.Fatalf("a new set blocks: %q %v", reason, ch)
	}

	local := s.LocalChanged()
	s.Raise(Memory)
	if !closed(local) {
		t.Fatal("raising a local alarm did not signal LocalChanged")
	}
	reason, changed := s.Blocking()
	if reason != "low on memory" || changed == nil {
		t.Fatalf("Blocking = %q, %v", reason, changed)
	}
	s.Raise(Memory) // again: no change
	if closed(changed) {
		t.Fatal("raising an alarm already on signalled a change")
	}

	// Another node's alarm: blocks too, but is not this node's to announce.
	local = s.LocalChanged()
	s.SetNode("n2", []Resource{Disk, Disk})
	if closed(local) {
		t.Fatal("another node's alarm signalled LocalChanged")
	}
	if !closed(changed) {
		t.Fatal("another node's alarm did not signal a change")
	}
	if reason, _ := s.Blocking(); reason != "low on disk & low on memory" {
		t.Fatalf("reason %q", reason)
	}
	want := []Alarm{{"n1", Memory}, {"n2", Disk}}
	if got := s.All(); !slices.Equal(got, want) {
		t.Fatalf("All = %v, want %v", got, want)
	}

	// Gossip echoing this node's own alarms back changes nothing.
	s.SetNode("n1", nil)
	if got := s.Local(); !slices.Equal(got, []Resource{Memory}) {
		t.Fatalf("Local after an echo = %v", got)
	}

	s.Clear(Memory)
	if reason, _ := s.Blocking(); reason != "low on disk" {
		t.Fatalf("after clearing the local alarm: %q", reason)
	}
	_, changed = s.Blocking()
	s.ForgetNode("n2") // it failed: it blocks nobody
	if !closed(changed) {
		t.Fatal("forgetting a node did not signal a change")
	}
	if reason, ch := s.Blocking(); reason != "" || ch != nil || len(s.All()) != 0 {
		t.Fatalf("after every alarm cleared: %q %v %v", reason, ch, s.All())
	}
}
