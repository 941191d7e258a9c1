package replica

import (
	"testing"

	"github.com/hashicorp/raft"
)

// A new group's member that has not heard from the member chosen to lead
// yet is a voter (the group's first configuration makes it one): `warrenctl
// check replicas-synced` listed every new queue's followers as still
// syncing for a moment after the declaration. A member added to an
// existing group, which starts empty in the same way, is not one until the
// leader promotes it.
func TestNewGroupMemberIsAVoterBeforeItHearsFromTheLeader(t *testing.T) {
	peers := []Peer{{ID: "a", Addr: "a"}, {ID: "b", Addr: "b"}, {ID: "c", Addr: "c"}}
	open := func(bootstrap bool) *Replica {
		_, tr := raft.NewInmemTransport("b") // connected to nobody
		r, err := Open(Config{Name: "test/q", Dir: t.TempDir(), NodeID: "b", Created: 1, Transport: tr, Peers: peers,
			Bootstrap: bootstrap, Follow: true, Log: testLog("b")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	}
	if st := open(true).Status(); !st.Voter {
		t.Errorf("a new group's member: %+v, want a voter", st)
	}
	if st := open(false).Status(); st.Voter {
		t.Errorf("a member added to a group: %+v, want no voter yet", st)
	}
}
