package node

import (
	"github.com/warrenmq/warren/membership"
	"github.com/warrenmq/warren/raftq"
)

// Quorum queue machine versions across a rolling upgrade (raftq/version.go):
// every node announces the newest version its build applies, and a
// queue's leader raises the queue's version once all of the queue's
// members' nodes announce it (replica.UpgradeMachine): when it starts to
// lead, and when gossip brings news of a node (a node restarted on a new
// build announces a newer version).

// queueMachine is the newest queue machine version this node applies.
func (c *clusterNode) queueMachine() int {
	if v := c.cfg.QueueMachineVersion; v > 0 {
		return min(v, raftq.MachineVersion)
	}
	return raftq.MachineVersion
}

// machineVersion is the newest queue machine version node applies, as
// gossip last told (replica.Config.MachineVersion): 0 for a node gossip
// has not told of, 1 for one whose build announces none.
func (c *clusterNode) machineVersion(node string) int {
	if node == c.self {
		return c.queueMachine()
	}
	m, ok := c.gossip.Member(node)
	switch {
	case !ok:
		return 0
	case m.QueueMachine > 0:
		return m.QueueMachine
	}
	return 1
}

// upgradeEvent has the queues this node leads raise their machine
// version, if they can, when a node joins or announces something new. It
// runs on its own goroutine: the lead loop must not wait for proposals.
func (c *clusterNode) upgradeEvent(ev membership.Event) {
	if ev.Kind != membership.Joined && ev.Kind != membership.Updated || ev.Member.QueueMachine <= 1 {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.upgradeMachines()
	}()
}

// upgradeMachines has every queue this node leads raise its machine
// version if it can, behind the two moments that normally do it (when it
// starts to lead, upgradeEvent): a leader whose node did not know every
// member's build at the first and heard of them before the replica led,
// or before it opened, would otherwise keep the old version until the
// next news of a node (a CI run of TestQueueMachineVersionAcrossAnUpgrade
// kept the queue at the old version for 20 s after the upgrade). The
// maintenance loop calls it every maintainInterval; for a queue at the
// newest version, or on a follower, it is two checks.
func (c *clusterNode) upgradeMachines() {
	for _, r := range c.host.byID() {
		r.UpgradeMachine()
	}
}
