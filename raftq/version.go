package raftq

import "fmt"

// Machine versions. A queue's members may run different builds for a
// while (a rolling upgrade), and every member must apply every entry
// alike, so a change in what the machine does, or in the commands and
// snapshots it reads, takes effect only from a machine version on: the
// queue runs version 1 from its creation, and its leader raises it
// (OpUpgrade) once the nodes of all its members apply the newer one, as
// Ra's machine versions do. Entries before the upgrade are applied as the
// version they were written under, on every member and in every replay.
//
// An older build stops on an OpUpgrade it cannot read; the leader never
// proposes one while a member's node runs such a build, and a new
// command (OpSuspend) is proposed only at a version that has it.
const (
	// VersionSuspend (2) suspends consumers cut off from the leader
	// (OpSuspend; before it OpSuspend changes nothing), and snapshots
	// carry the version and the suspended flag.
	VersionSuspend = 2

	// MachineVersion is the newest version this build applies.
	MachineVersion = VersionSuspend
)

// Version is the machine version the queue runs.
func (m *Machine) Version() uint32 { return m.version }

// Suspends says whether OpSuspend suspends (machine version 2 on); the
// runtime proposes it only then.
func (m *Machine) Suspends() bool { return m.version >= VersionSuspend }

// upgrade makes the queue run version v from the next command on. A
// version it already runs, or an older one, changes nothing: two leaders
// may both have proposed the upgrade.
func (m *Machine) upgrade(v uint32) {
	if v > MachineVersion {
		// Decode refuses it first; only a command built in memory gets
		// here.
		panic(fmt.Sprintf("raftq: upgrade to machine version %d, this build applies up to %d", v, MachineVersion))
	}
	m.version = max(m.version, v)
}

// Needs is the machine version a build must apply to read c: an older
// build stops on it.
func (c *Command) Needs() uint32 {
	switch c.Op {
	case OpSuspend:
		return VersionSuspend
	case OpUpgrade:
		return max(c.Version, 1)
	}
	return 1
}
