package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// lab gives each node a network namespace of its own, joined by a bridge
// on the host, so that a node's links to the others can be cut with
// nftables while the harness (on the bridge's address) still reaches it:
// a partition as a network sees it, not a stopped process.
type lab struct {
	bridge string
	subnet string
	ns     []string
	ips    []string
}

// labAvailable says why partitions cannot be made here, or "".
func labAvailable() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	for _, tool := range []string{"ip", "nft", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed"
		}
	}
	return ""
}

// newLab makes n namespaces on a new bridge. id keeps concurrent runs'
// names and subnets apart (0-199).
func newLab(n, id int) (*lab, error) {
	l := &lab{bridge: fmt.Sprintf("jbr%d", id), subnet: fmt.Sprintf("10.%d.%d", 150+id/100, id%100)}
	exec.Command("ip", "link", "del", l.bridge).Run()
	steps := [][]string{
		{"ip", "link", "add", l.bridge, "type", "bridge"},
		{"ip", "addr", "add", l.subnet + ".254/24", "dev", l.bridge},
		{"ip", "link", "set", l.bridge, "up"},
		// Docker's FORWARD policy drops bridged traffic when bridge
		// netfilter is on; let this bridge's through.
		{"iptables", "-I", "FORWARD", "1", "-i", l.bridge, "-o", l.bridge, "-j", "ACCEPT"},
	}
	for i := 0; i < n; i++ {
		ns, veth, ip := fmt.Sprintf("jn%d-%d", id, i), fmt.Sprintf("jv%d-%d", id, i), fmt.Sprintf("%s.%d", l.subnet, i+1)
		exec.Command("ip", "netns", "del", ns).Run()
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "link", "set", veth, "master", l.bridge, "up"},
			[]string{"ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
		)
		l.ns = append(l.ns, ns)
		l.ips = append(l.ips, ip)
	}
	for _, s := range steps {
		if err := sh(s...); err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

func sh(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// cut drops every packet between node i and the other nodes, both ways.
func (l *lab) cut(i int) error {
	var others []string
	for j, ip := range l.ips {
		if j != i {
			others = append(others, ip)
		}
	}
	set := "{ " + strings.Join(others, ", ") + " }"
	in := []string{"ip", "netns", "exec", l.ns[i], "nft"}
	for _, s := range [][]string{
		{"add", "table", "inet", "partition"},
		{"add", "chain", "inet", "partition", "in", "{ type filter hook input priority 0; }"},
		{"add", "chain", "inet", "partition", "out", "{ type filter hook output priority 0; }"},
		{"add", "rule", "inet", "partition", "in", "ip", "saddr", set, "drop"},
		{"add", "rule", "inet", "partition", "out", "ip", "daddr", set, "drop"},
	} {
		if err := sh(append(in, s...)...); err != nil {
			return err
		}
	}
	return nil
}

// dropRules turns a plan into nftables rules, one per node that drops
// something: on its input, the packets from the plan's sources for it,
// all of them or plan.loss percent at random.
func dropRules(plan netPlan, ips []string) map[int][]string {
	srcs := map[int][]string{}
	for _, d := range plan.drops {
		srcs[d[1]] = append(srcs[d[1]], ips[d[0]])
	}
	rules := map[int][]string{}
	for dst, from := range srcs {
		slices.Sort(from)
		r := []string{"ip", "saddr", "{ " + strings.Join(from, ", ") + " }"}
		if plan.loss > 0 {
			r = append(r, "numgen", "random", "mod", "100", "<", strconv.Itoa(plan.loss))
		}
		rules[dst] = append(r, "drop")
	}
	return rules
}

// apply puts a plan into the namespaces: each node that drops something
// gets an input filter in the same table cut uses, so that heal removes
// either. On an error, what was applied is removed again.
func (l *lab) apply(plan netPlan) error {
	for dst, rule := range dropRules(plan, l.ips) {
		in := []string{"ip", "netns", "exec", l.ns[dst], "nft"}
		for _, s := range [][]string{
			{"add", "table", "inet", "partition"},
			{"add", "chain", "inet", "partition", "in", "{ type filter hook input priority 0; }"},
			append([]string{"add", "rule", "inet", "partition", "in"}, rule...),
		} {
			if err := sh(append(in, s...)...); err != nil {
				for i := range l.ns {
					l.heal(i)
				}
				return err
			}
		}
	}
	return nil
}

// heal removes node i's packet filter, if it has one.
func (l *lab) heal(i int) {
	exec.Command("ip", "netns", "exec", l.ns[i], "nft", "delete", "table", "inet", "partition").Run()
}

// close removes the namespaces, the bridge and its forwarding rule.
func (l *lab) close() {
	for _, ns := range l.ns {
		exec.Command("ip", "netns", "del", ns).Run()
	}
	exec.Command("iptables", "-D", "FORWARD", "-i", l.bridge, "-o", l.bridge, "-j", "ACCEPT").Run()
	exec.Command("ip", "link", "del", l.bridge).Run()
}
