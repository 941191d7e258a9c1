package wal

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"
)

// modelGroup is what a group should hold: a plain map per group.
type modelGroup struct {
	entries map[uint64][]byte
	stable  map[string][]byte
}

func (m *modelGroup) bounds() (first, last uint64) {
	for i := range m.entries {
		if first == 0 || i < first {
			first = i
		}
		if i > last {
			last = i
		}
	}
	return first, last
}

// TestModel runs random writes, deletions (prefixes, holes, cut tails),
// stable values, drops and reopenings against small segments, so that
// segments roll, compact and go, and compares the log with a map after
// every step and after every reopening. Each opening writes directly or
// through the page cache (direct.go), as drawn, where the file system
// takes direct writes.
func TestModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		segSize := rapid.Int64Range(200, 3000).Draw(rt, "segSize")
		opts := func() Options {
			return Options{SegmentSize: segSize, Buffered: rapid.Bool().Draw(rt, "buffered")}
		}
		l, err := Open(dir, opts())
		if err != nil {
			rt.Fatal(err)
		}
		defer func() {
			if l != nil {
				l.Close()
			}
		}()
		names := []string{"a", "b", "c"}
		model := map[string]*modelGroup{}
		handle := func(name string) *Group {
			g, err := l.Group(name)
			if err != nil {
				rt.Fatal(err)
			}
			if model[name] == nil {
				model[name] = &modelGroup{entries: map[uint64][]byte{}, stable: map[string][]byte{}}
			}
			return g
		}
		seq := 0
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			name := rapid.SampledFrom(names).Draw(rt, "group")
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op <= 3: // append, sometimes after cutting the tail
				g, m := handle(name), model[name]
				_, last := m.bounds()
				from := last + 1
				if last > 0 && rapid.Bool().Draw(rt, "cut") {
					from = rapid.Uint64Range(last-min(last-1, 5), last).Draw(rt, "cutFrom")
					if err := g.DeleteRange(from, last); err != nil {
						rt.Fatal(err)
					}
					for i := from; i <= last; i++ {
						delete(m.entries, i)
					}
				}
				n := rapid.IntRange(1, 8).Draw(rt, "n")
				var logs []*raft.Log
				for k := 0; k < n; k++ {
					seq++
					data := bytes.Repeat([]byte{byte(seq)}, rapid.IntRange(0, 120).Draw(rt, "size"))
					logs = append(logs, &raft.Log{Index: from + uint64(k), Term: uint64(seq), Data: data})
					m.entries[from+uint64(k)] = data
				}
				if err := g.StoreLogs(logs); err != nil {
					rt.Fatal(err)
				}
			case op <= 5: // delete a stretch: a prefix or a hole
				g, m := handle(name), model[name]
				first, last := m.bounds()
				if last == 0 {
					continue
				}
				a := rapid.Uint64Range(first, last).Draw(rt, "delFrom")
				b := rapid.Uint64Range(a, last).Draw(rt, "delTo")
				if err := g.DeleteRange(a, b); err != nil {
					rt.Fatal(err)
				}
				for i := a; i <= b; i++ {
					delete(m.entries, i)
				}
			case op == 6:
				g, m := handle(name), model[name]
				key := rapid.SampledFrom([]string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"}).Draw(rt, "key")
				val := []byte(fmt.Sprint(rapid.IntRange(0, 3).Draw(rt, "val")))
				if err := g.Set([]byte(key), val); err != nil {
					rt.Fatal(err)
				}
				m.stable[key] = val
			case op == 7:
				if err := l.DropGroup(name); err != nil {
					rt.Fatal(err)
				}
				delete(model, name)
			default:
				if err := l.Close(); err != nil {
					rt.Fatal(err)
				}
				if l, err = Open(dir, opts()); err != nil {
					rt.Fatal(err)
				}
			}
			compare(rt, l, model)
		}
		l.Close()
		if l, err = Open(dir, opts()); err != nil {
			rt.Fatal(err)
		}
		compare(rt, l, model)
	})
}

func compare(rt *rapid.T, l *Log, model map[string]*modelGroup) {
	for name, m := range model {
		g, err := l.Group(name)
		if err != nil {
			rt.Fatal(err)
		}
		first, last := m.bounds()
		if f, _ := g.FirstIndex(); f != first {
			rt.Fatalf("%s: first %d, want %d", name, f, first)
		}
		if n, _ := g.LastIndex(); n != last {
			rt.Fatalf("%s: last %d, want %d", name, n, last)
		}
		for i := first; i <= last && last > 0; i++ {
			var got raft.Log
			err := g.GetLog(i, &got)
			want, ok := m.entries[i]
			switch {
			case !ok && err != raft.ErrLogNotFound:
				rt.Fatalf("%s: entry %d should be gone: %v", name, i, err)
			case ok && err != nil:
				rt.Fatalf("%s: entry %d: %v", name, i, err)
			case ok && !bytes.Equal(got.Data, want):
				rt.Fatalf("%s: entry %d data %x, want %x", name, i, got.Data, want)
			}
		}
		for k, want := range m.stable {
			if got, err := g.Get([]byte(k)); err != nil || !bytes.Equal(got, want) {
				rt.Fatalf("%s: stable %s = %q, %v; want %q", name, k, got, err, want)
			}
		}
	}
	for _, id := range l.Groups() {
		if model[id] == nil {
			// Opened by Group above, or written: must be empty.
			g, _ := l.Group(id)
			if n, _ := g.LastIndex(); n != 0 {
				rt.Fatalf("group %s should be dropped, has entries up to %d", id, n)
			}
		}
	}
	checkAccounting(rt, l)
}
