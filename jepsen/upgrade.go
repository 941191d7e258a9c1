package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A rolling upgrade (--upgrade-from): the cluster starts on an older
// build, and the nemesis moves one node after another to the new one, a
// node per round, before that round's fault, as an operator upgrades a
// cluster under load. The history's checker judges the messages as in any
// run; afterwards every queue member must run the new build's queue
// machine version, which each queue's leader raises once all its
// members' nodes apply it (docs/operations.md, rolling upgrades).
//
// The harness is a client of the binaries: it learns the new build's
// machine version from the upgraded nodes themselves (warrenctl cluster
// status's queue_machine, the newest version each node's build applies),
// not from Warren's packages.

// upgradeNext stops the next node still on the old build gracefully (its
// leaderships handed off) and starts it on the new one.
func (n *nemesis) upgradeNext() {
	nd := n.c.nodes[n.upgraded]
	n.upgraded++
	n.note("upgrade %s: stop, start on the new build", nd.name)
	if err := nd.stop(); err != nil {
		n.note("upgrade %s: stop failed: %v", nd.name, err)
	}
	nd.args[0] = n.upgradeTo
	if err := nd.restart(); err != nil {
		n.note("upgrade %s: start failed: %v", nd.name, err)
		return
	}
	n.note("upgraded %s", nd.name)
}

// upgradeVerdict says how far the rolling upgrade went.
type upgradeVerdict struct {
	// Upgraded is how many nodes were moved to the new build.
	Upgraded int `json:"upgraded"`
	// Behind are the queue members, answering and awake, that do not run
	// the new build's queue machine version: a defect once every node
	// runs it.
	Behind []string `json:"behind,omitempty"`
	// Machine is the new build's queue machine version, as the upgraded
	// nodes announce it (0: none announced one).
	Machine uint32 `json:"machine,omitempty"`
	nodes   int
}

func (u *upgradeVerdict) ok() bool { return u.Upgraded == u.nodes && len(u.Behind) == 0 }

func (u *upgradeVerdict) String() string {
	return fmt.Sprintf("rolling upgrade: %d of %d nodes upgraded; queue members behind machine version %d: %d",
		u.Upgraded, u.nodes, u.Machine, len(u.Behind))
}

// machinesBehind lists the members of queues (answering, not
// hibernating) that do not report the new build's machine version, asking
// again for up to 30 s: a follower applies the upgrade's entry a moment
// after its leader. upgraded names the nodes moved to the new build; the
// highest machine version they announce is the one every member must run
// (returned too, 0 if none announced one).
func machinesBehind(ctx context.Context, c *cluster, warrenctl string, upgraded, queues []string) ([]string, uint32) {
	var behind []string
	var target uint32
	for deadline := time.Now().Add(30 * time.Second); ; {
		behind = nil
		var err error
		if target, err = newMachine(ctx, c, warrenctl, upgraded); err != nil {
			behind = append(behind, fmt.Sprintf("the new build's machine version: %v", err))
		}
		for _, q := range queues {
			if target == 0 {
				break
			}
			out, err := c.ctl(ctx, warrenctl, "--json", "quorum", "status", q)
			if err != nil {
				behind = append(behind, fmt.Sprintf("%s: quorum status: %v", q, err))
				continue
			}
			var st struct {
				Members []struct {
					Node           string  `json:"node"`
					Role           string  `json:"role"`
					MachineVersion *uint32 `json:"machine_version"`
				} `json:"members"`
			}
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				behind = append(behind, fmt.Sprintf("%s: quorum status: %v", q, err))
				continue
			}
			for _, m := range st.Members {
				if m.Role == "unreachable" || m.Role == "asleep" {
					continue
				}
				if m.MachineVersion == nil || *m.MachineVersion != target {
					v := "none"
					if m.MachineVersion != nil {
						v = fmt.Sprint(*m.MachineVersion)
					}
					behind = append(behind, fmt.Sprintf("%s on %s: machine version %s", q, m.Node, v))
				}
			}
		}
		if len(behind) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return behind, target
		}
		time.Sleep(time.Second)
	}
}

// newMachine is the highest queue machine version the upgraded nodes
// announce (warrenctl cluster status's queue_machine: the newest version
// the node's build applies).
func newMachine(ctx context.Context, c *cluster, warrenctl string, upgraded []string) (uint32, error) {
	out, err := c.ctl(ctx, warrenctl, "--json", "cluster", "status")
	if err != nil {
		return 0, fmt.Errorf("cluster status: %v: %s", err, out)
	}
	return highestMachine([]byte(out), upgraded)
}

// highestMachine reads warrenctl's cluster status in JSON and returns the
// highest queue_machine among the nodes named.
func highestMachine(status []byte, nodes []string) (uint32, error) {
	var st struct {
		Nodes []struct {
			Name         string  `json:"name"`
			QueueMachine *uint32 `json:"queue_machine"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(status, &st); err != nil {
		return 0, fmt.Errorf("cluster status: %w", err)
	}
	var v uint32
	for _, n := range st.Nodes {
		if n.QueueMachine != nil && slices.Contains(nodes, n.Name) {
			v = max(v, *n.QueueMachine)
		}
	}
	if v == 0 {
		return 0, fmt.Errorf("no upgraded node (%s) announces a queue machine version", strings.Join(nodes, ", "))
	}
	return v, nil
}
