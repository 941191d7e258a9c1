package wal

import (
	"slices"
	"sort"
)

// loc is where a record lies: its segment, offset and length (header
// included). 12 bytes per entry is what the index costs in memory.
type loc struct {
	seg uint32
	off uint32
	n   uint32
}

// group is one Raft group's part of the index.
type group struct {
	id string
	// runs hold the entries' locations, each run a stretch of consecutive
	// indexes, sorted and never touching (a queue's log is sparse: it
	// keeps the entries of live messages, see raftq/replica).
	runs    []run
	stable  map[string]stableVal
	dropped bool
}

type run struct {
	first uint64
	locs  []loc
}

func (r *run) last() uint64 { return r.first + uint64(len(r.locs)) - 1 }

type stableVal struct {
	val []byte
	seg uint32
}

func newGroup(id string) *group {
	return &group{id: id, stable: make(map[string]stableVal)}
}

func (g *group) firstIndex() uint64 {
	if len(g.runs) == 0 {
		return 0
	}
	return g.runs[0].first
}

func (g *group) lastIndex() uint64 {
	if len(g.runs) == 0 {
		return 0
	}
	return g.runs[len(g.runs)-1].last()
}

// search returns the position of the first run whose last index is at
// least i.
func (g *group) search(i uint64) int {
	return sort.Search(len(g.runs), func(k int) bool { return g.runs[k].last() >= i })
}

func (g *group) find(i uint64) (loc, bool) {
	k := g.search(i)
	if k == len(g.runs) || g.runs[k].first > i {
		return loc{}, false
	}
	return g.runs[k].locs[i-g.runs[k].first], true
}

// put records entry i at l, returning the location it replaces, if any.
// Appending after the last index is the common case and costs no search.
func (g *group) put(i uint64, l loc) (old loc, replaced bool) {
	if n := len(g.runs); n > 0 {
		last := &g.runs[n-1]
		switch {
		case i == last.last()+1:
			last.locs = append(last.locs, l)
			return loc{}, false
		case i > last.last()+1:
			g.runs = append(g.runs, run{first: i, locs: []loc{l}})
			return loc{}, false
		}
	} else {
		g.runs = append(g.runs, run{first: i, locs: []loc{l}})
		return loc{}, false
	}
	k := g.search(i)
	r := &g.runs[k]
	if r.first <= i {
		old = r.locs[i-r.first]
		r.locs[i-r.first] = l
		return old, true
	}
	// In a gap before run k: join the run before, or this one, or stand
	// alone. (Only replay and copies made by compaction land here.)
	switch {
	case k > 0 && g.runs[k-1].last()+1 == i:
		g.runs[k-1].locs = append(g.runs[k-1].locs, l)
		if g.runs[k-1].last()+1 == r.first {
			g.runs[k-1].locs = append(g.runs[k-1].locs, r.locs...)
			g.runs = slices.Delete(g.runs, k, k+1)
		}
	case i+1 == r.first:
		r.locs = append([]loc{l}, r.locs...)
		r.first = i
	default:
		g.runs = slices.Insert(g.runs, k, run{first: i, locs: []loc{l}})
	}
	return loc{}, false
}

// deleteRange removes entries [from, to], calling dead for each removed
// location.
func (g *group) deleteRange(from, to uint64, dead func(loc)) {
	k := g.search(from)
	out := g.runs[:k:k]
	var tail []run
	for ; k < len(g.runs); k++ {
		r := g.runs[k]
		if r.first > to {
			tail = g.runs[k:]
			break
		}
		lo, hi := max(from, r.first), min(to, r.last())
		for _, l := range r.locs[lo-r.first : hi-r.first+1] {
			dead(l)
		}
		if r.first < lo {
			out = append(out, run{first: r.first, locs: keep(r.locs[:lo-r.first])})
		}
		if hi < r.last() {
			out = append(out, run{first: hi + 1, locs: keep(r.locs[hi+1-r.first:])})
		}
	}
	g.runs = append(out, tail...)
}

// keep returns part, or a copy of it when it holds on to a backing array
// mostly made of deleted entries (one live message left in a long run).
func keep(part []loc) []loc {
	if 4*len(part) < cap(part) {
		return slices.Clone(part)
	}
	return slices.Clip(part)
}

// each calls fn for every entry located in segment seg.
func (g *group) each(seg uint32, fn func(i uint64, l loc)) {
	for _, r := range g.runs {
		for k, l := range r.locs {
			if l.seg == seg {
				fn(r.first+uint64(k), l)
			}
		}
	}
}
