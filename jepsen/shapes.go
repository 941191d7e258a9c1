package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// lossPercent is the share of packets between nodes the loss fault drops.
const lossPercent = 20

// netPlan is a network fault worked out from the seed: which packets
// between nodes are dropped. It is pure, so that the shapes can be tested
// without root; lab.apply puts it into the namespaces.
type netPlan struct {
	// groups describes the shape for the schedule: the halves, the ring
	// in order, or the two halves with the bridge node last.
	groups [][]int
	// drops are the (src, dst) pairs whose packets from src to dst are
	// dropped (all of them, or lossPercent of them with loss).
	drops [][2]int
	// loss is the percentage of the drops' packets dropped; 0 for all.
	loss int
}

// nodes returns the nodes the plan touches, in order.
func (p netPlan) nodes() []int {
	var out []int
	for _, d := range p.drops {
		out = append(out, d[0], d[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// describe names the shape's groups with the nodes' names.
func (p netPlan) describe(names []string) string {
	var gs []string
	for _, g := range p.groups {
		var ns []string
		for _, i := range g {
			ns = append(ns, names[i])
		}
		gs = append(gs, "["+strings.Join(ns, " ")+"]")
	}
	s := strings.Join(gs, " ")
	if p.loss > 0 {
		s += fmt.Sprintf(" %d%% of packets", p.loss)
	}
	return s
}

// fromSees drops every packet between two nodes where sees says they do
// not see each other (sees must be symmetric).
func fromSees(n int, sees func(a, b int) bool) [][2]int {
	var drops [][2]int
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			if a != b && !sees(a, b) {
				drops = append(drops, [2]int{a, b})
			}
		}
	}
	return drops
}

func majority(n int) int { return n/2 + 1 }

// planHalves splits the nodes into two random groups, n/2 and the rest (a
// majority), cut from each other both ways.
func planHalves(rng *rand.Rand, n int) netPlan {
	perm := rng.Perm(n)
	small, big := sorted(perm[:n/2]), sorted(perm[n/2:])
	group := make([]int, n)
	for _, i := range big {
		group[i] = 1
	}
	return netPlan{groups: [][]int{small, big}, drops: fromSees(n, func(a, b int) bool { return group[a] == group[b] })}
}

// planRing orders the nodes in a random ring and lets each see only its
// neighbours within the smallest distance that makes a majority with
// itself (1 for 5 nodes: itself and two neighbours), as Jepsen's
// majorities ring: every node sees a majority, no two the same one. With
// 3 nodes each node's neighbours are all the others, so the ring is
// opened instead: the link between its first and last node is cut, and
// the middle one sees both (a line: each end sees a majority of two, no
// two nodes the same set).
func planRing(rng *rand.Rand, n int) netPlan {
	ring := rng.Perm(n)
	pos := make([]int, n)
	for p, i := range ring {
		pos[i] = p
	}
	k := majority(n) / 2
	if 2*k+1 >= n {
		// Everybody would see everybody: open the ring between its ends.
		ends := [2]int{ring[0], ring[n-1]}
		return netPlan{groups: [][]int{ring}, drops: [][2]int{{ends[0], ends[1]}, {ends[1], ends[0]}}}
	}
	return netPlan{groups: [][]int{ring}, drops: fromSees(n, func(a, b int) bool {
		d := pos[a] - pos[b]
		if d < 0 {
			d = -d
		}
		return min(d, n-d) <= k
	})}
}

// planBridge splits the nodes other than a random bridge node into two
// halves cut from each other, while the bridge sees both: each half with
// the bridge is a majority, and only the bridge sees everyone. With 3
// nodes the halves are one node each: the two ends of a line.
func planBridge(rng *rand.Rand, n int) netPlan {
	perm := rng.Perm(n)
	bridge, rest := perm[0], perm[1:]
	a, b := sorted(rest[:len(rest)/2]), sorted(rest[len(rest)/2:])
	side := make([]int, n)
	for _, i := range a {
		side[i] = 1
	}
	for _, i := range b {
		side[i] = 2
	}
	side[bridge] = 0
	return netPlan{groups: [][]int{a, b, {bridge}}, drops: fromSees(n, func(x, y int) bool {
		return side[x] == 0 || side[y] == 0 || side[x] == side[y]
	})}
}

// planOneway picks two random nodes a and b and drops a's packets to b
// only; b's to a are delivered.
func planOneway(rng *rand.Rand, n int) netPlan {
	a := rng.IntN(n)
	b := (a + 1 + rng.IntN(n-1)) % n
	return netPlan{groups: [][]int{{a}, {b}}, drops: [][2]int{{a, b}}}
}

// planLoss drops lossPercent of the packets between every two nodes, each
// way, at random.
func planLoss(n int) netPlan {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return netPlan{groups: [][]int{all}, drops: fromSees(n, func(a, b int) bool { return false }), loss: lossPercent}
}

// pickMinority picks (n-1)/2 random nodes: as many as a majority survives
// the loss of.
func pickMinority(rng *rand.Rand, n int) []int {
	return sorted(rng.Perm(n)[:(n-1)/2])
}

func sorted(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
