package main

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// sees is the set of nodes each node exchanges packets with both ways,
// itself included.
func seesOf(p netPlan, n int) [][]int {
	cut := map[[2]int]bool{}
	for _, d := range p.drops {
		cut[d] = true
	}
	out := make([][]int, n)
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			if a == b || (!cut[[2]int{a, b}] && !cut[[2]int{b, a}]) {
				out[a] = append(out[a], b)
			}
		}
	}
	return out
}

func checkDrops(t *testing.T, name string, p netPlan, n int, symmetric bool) {
	t.Helper()
	seen := map[[2]int]bool{}
	for _, d := range p.drops {
		if d[0] == d[1] || d[0] < 0 || d[1] < 0 || d[0] >= n || d[1] >= n {
			t.Errorf("%s n=%d: bad pair %v", name, n, d)
		}
		if seen[d] {
			t.Errorf("%s n=%d: pair %v twice", name, n, d)
		}
		seen[d] = true
	}
	if symmetric {
		for d := range seen {
			if !seen[[2]int{d[1], d[0]}] {
				t.Errorf("%s n=%d: %v dropped, not the other way", name, n, d)
			}
		}
	}
	if len(p.drops) == 0 {
		t.Errorf("%s n=%d: drops nothing", name, n)
	}
}

func TestShapesAreSeeded(t *testing.T) {
	for _, plan := range map[string]func(*rand.Rand, int) netPlan{"halves": planHalves, "ring": planRing, "bridge": planBridge, "oneway": planOneway} {
		for seed := uint64(0); seed < 20; seed++ {
			a, b := plan(seeded(seed), 5), plan(seeded(seed), 5)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d: %v, then %v", seed, a, b)
			}
		}
	}
}

func TestHalves(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(0); seed < 50; seed++ {
			p := planHalves(seeded(seed), n)
			checkDrops(t, "halves", p, n, true)
			if len(p.groups) != 2 || len(p.groups[0]) != n/2 || len(p.groups[1]) != n-n/2 {
				t.Fatalf("n=%d: groups %v", n, p.groups)
			}
			sees := seesOf(p, n)
			for _, g := range p.groups {
				for _, i := range g {
					if !slices.Equal(sees[i], g) {
						t.Errorf("n=%d: %d sees %v, want its group %v", n, i, sees[i], g)
					}
				}
			}
			if len(p.drops) != 2*len(p.groups[0])*len(p.groups[1]) {
				t.Errorf("n=%d: %d drops for groups %v", n, len(p.drops), p.groups)
			}
		}
	}
}

func TestRing(t *testing.T) {
	for _, n := range []int{3, 4, 5, 7} {
		for seed := uint64(0); seed < 50; seed++ {
			p := planRing(seeded(seed), n)
			checkDrops(t, "ring", p, n, true)
			sees := seesOf(p, n)
			// Every node sees a majority, and none sees everyone but the
			// middle of the opened 3-node ring.
			for i, s := range sees {
				if len(s) < majority(n) {
					t.Errorf("n=%d: %d sees %v, no majority", n, i, s)
				}
			}
			if n == 3 {
				if len(p.drops) != 2 {
					t.Errorf("n=3: drops %v, want one link", p.drops)
				}
				continue
			}
			// No two nodes see the same majority.
			for a := range sees {
				for b := a + 1; b < n; b++ {
					if slices.Equal(sees[a], sees[b]) {
						t.Errorf("n=%d: %d and %d both see %v", n, a, b, sees[a])
					}
				}
				if len(sees[a]) == n {
					t.Errorf("n=%d: %d sees everyone", n, a)
				}
			}
		}
	}
	// 5 nodes: a ring, each node sees its two neighbours.
	p := planRing(seeded(7), 5)
	ring := p.groups[0]
	sees := seesOf(p, 5)
	for pos, i := range ring {
		want := sorted([]int{ring[(pos+4)%5], i, ring[(pos+1)%5]})
		if !slices.Equal(sees[i], want) {
			t.Errorf("ring %v: %d sees %v, want %v", ring, i, sees[i], want)
		}
	}
}

func TestBridge(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(0); seed < 50; seed++ {
			p := planBridge(seeded(seed), n)
			checkDrops(t, "bridge", p, n, true)
			a, b, bridge := p.groups[0], p.groups[1], p.groups[2][0]
			if len(a)+len(b)+1 != n || len(a) == 0 || len(b) == 0 {
				t.Fatalf("n=%d: groups %v", n, p.groups)
			}
			sees := seesOf(p, n)
			if len(sees[bridge]) != n {
				t.Errorf("n=%d: bridge %d sees %v, want everyone", n, bridge, sees[bridge])
			}
			for _, g := range [][]int{a, b} {
				want := sorted(append(slices.Clone(g), bridge))
				if len(want) < majority(n) {
					t.Errorf("n=%d: half %v with the bridge is no majority", n, g)
				}
				for _, i := range g {
					if !slices.Equal(sees[i], want) {
						t.Errorf("n=%d: %d sees %v, want %v", n, i, sees[i], want)
					}
				}
			}
		}
	}
}

func TestOneway(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(0); seed < 50; seed++ {
			p := planOneway(seeded(seed), n)
			checkDrops(t, "oneway", p, n, false)
			if len(p.drops) != 1 || p.drops[0] != [2]int{p.groups[0][0], p.groups[1][0]} {
				t.Errorf("n=%d: drops %v for %v", n, p.drops, p.groups)
			}
		}
	}
}

func TestLoss(t *testing.T) {
	p := planLoss(3)
	checkDrops(t, "loss", p, 3, true)
	if len(p.drops) != 6 || p.loss != lossPercent || !slices.Equal(p.nodes(), []int{0, 1, 2}) {
		t.Errorf("loss: %+v", p)
	}
}

func TestMinority(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(0); seed < 20; seed++ {
			m := pickMinority(seeded(seed), n)
			if len(m) != (n-1)/2 || len(m) >= majority(n) || !slices.IsSorted(m) {
				t.Errorf("n=%d: minority %v", n, m)
			}
		}
	}
}

// TestDropRules: each node's filter drops, on input, the packets of the
// sources the plan names for it, all or a share.
func TestDropRules(t *testing.T) {
	ips := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	got := dropRules(netPlan{drops: [][2]int{{0, 1}, {2, 1}, {1, 0}}}, ips)
	want := map[int][]string{
		0: {"ip", "saddr", "{ 10.0.0.2 }", "drop"},
		1: {"ip", "saddr", "{ 10.0.0.1, 10.0.0.3 }", "drop"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rules %v, want %v", got, want)
	}
	got = dropRules(netPlan{drops: [][2]int{{0, 1}}, loss: 20}, ips)
	want = map[int][]string{1: {"ip", "saddr", "{ 10.0.0.1 }", "numgen", "random", "mod", "100", "<", "20", "drop"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loss rules %v, want %v", got, want)
	}
}
