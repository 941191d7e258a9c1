package replica

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/raftq"
)

// upgrader is a leader's part in raising the queue's machine version.
type upgrader struct {
	core *core
	// upgrading is the machine version this leader proposed last
	// (UpgradeMachine); cleared when it stops leading, as is upgradeHeld,
	// set once UpgradeMachine has logged why it could not.
	upgrading   atomic.Uint32
	upgradeHeld atomic.Bool
}

// UpgradeMachine has the leader raise the queue's machine version
// (raftq/version.go) to the newest one every member's node applies, if
// the queue runs an older one: a member whose node applies less would
// stop on the upgrade, or on a command of the newer version. The leader
// calls it when it starts to lead; the node, when gossip brings news of a
// node, and once a second (its maintenance loop) in case neither found
// every member's build known. It does nothing on a follower, and proposes
// each version once per leadership.
func (r *Replica) UpgradeMachine() { r.upgrade.run() }

// run is UpgradeMachine.
func (u *upgrader) run() {
	if !u.core.isLeader() {
		return
	}
	current := u.core.MachineVersion()
	if current >= raftq.MachineVersion {
		return
	}
	f := u.core.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	v := u.membersMachineVersion(servers)
	if v <= current {
		if !u.upgradeHeld.Swap(true) { // once per leadership
			held := make([]string, 0, len(servers))
			for _, s := range servers {
				held = append(held, fmt.Sprintf("%s=%d", s.ID, u.nodeMachineVersion(string(s.ID))))
			}
			u.core.log.Debug("queue machine version held back by a member's build", "runs", current, "newest", raftq.MachineVersion, "members", held)
		}
		return
	}
	if v <= u.upgrading.Load() {
		return
	}
	u.upgrading.Store(v)
	u.core.log.Debug("raising the queue's machine version", "from", current, "to", v)
	u.core.propose(&raftq.Command{Op: raftq.OpUpgrade, Version: v})
}

// membersMachineVersion is the newest machine version all of servers'
// nodes apply (non-voters too: they apply every entry).
func (u *upgrader) membersMachineVersion(servers []raft.Server) uint32 {
	v := uint32(raftq.MachineVersion)
	for _, s := range servers {
		v = min(v, u.nodeMachineVersion(string(s.ID)))
	}
	return v
}

// nodeMachineVersion is the newest machine version node's build applies,
// as Config.MachineVersion says; without it, this build's for this node
// and 1 for others (nobody told).
func (u *upgrader) nodeMachineVersion(node string) uint32 {
	switch {
	case u.core.cfg.MachineVersion != nil:
		return uint32(max(u.core.cfg.MachineVersion(node), 1))
	case node == u.core.cfg.NodeID:
		return raftq.MachineVersion
	}
	return 1
}

// MachineVersion is the machine version the queue runs, as this member
// has applied it.
func (c *core) MachineVersion() uint32 {
	c.fsm.mu.Lock()
	defer c.fsm.mu.Unlock()
	return c.fsm.m.Version()
}

// ErrMachineVersion refuses a member whose node's build does not apply
// the queue's machine version: it would stop on the log.
var ErrMachineVersion = errors.New("replica: the node's build does not apply the queue's machine version")

// canJoin refuses node as a new member if its build applies an older
// machine version than the queue runs (a node not yet upgraded, in a
// rolling upgrade).
func (c *core) canJoin(node string) error {
	if c.cfg.MachineVersion == nil {
		return nil
	}
	announced, runs := c.cfg.MachineVersion(node), c.MachineVersion()
	switch has := uint32(max(announced, 1)); {
	case has >= runs:
		return nil
	case announced == 0:
		// Not refused for its build: this node has not heard of it yet
		// (gossip reaches every node within seconds of a join, or at
		// its next full exchange under loss).
		return fmt.Errorf("%w: %s has not announced the queue machine version it applies to this node yet (it has just joined, or gossip has not reached it); try again", ErrMachineVersion, node)
	default:
		return fmt.Errorf("%w: %s applies queue machine version %d, the queue runs %d; upgrade %s first", ErrMachineVersion, node, has, runs, node)
	}
}

// stopLeading forgets this leadership's proposals and warnings: a later
// one proposes and warns again.
func (u *upgrader) stopLeading() {
	u.upgrading.Store(0)
	u.upgradeHeld.Store(false)
}
