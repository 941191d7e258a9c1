package main

import "testing"

// TestHighestMachineOfTheUpgradedNodes: the new build's queue machine
// version comes from warrenctl's cluster status, the highest the upgraded
// nodes announce; a node not named (still on the old build) or announcing
// none (a build from before machine versions) does not count.
func TestHighestMachineOfTheUpgradedNodes(t *testing.T) {
	status := []byte(`{"node":"warren-0","metadata_leader":"warren-1","nodes":[
		{"name":"warren-0","state":"alive","queue_machine":3},
		{"name":"warren-1","state":"alive","queue_machine":2},
		{"name":"warren-2","state":"alive","queue_machine":9},
		{"name":"warren-3","state":"alive","queue_machine":null}]}`)
	v, err := highestMachine(status, []string{"warren-0", "warren-1", "warren-3"})
	if err != nil || v != 3 {
		t.Fatalf("highestMachine = %d, %v; want 3", v, err)
	}
	if v, err := highestMachine(status, []string{"warren-3"}); err == nil {
		t.Fatalf("highestMachine of a node announcing none = %d, want an error", v)
	}
	if _, err := highestMachine([]byte("Unavailable"), []string{"warren-0"}); err == nil {
		t.Fatal("highestMachine of text that is not JSON: no error")
	}
}
