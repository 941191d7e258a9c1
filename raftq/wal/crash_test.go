package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/warrenmq/warren/jepsen/lazyfs"
	"github.com/warrenmq/warren/raftq/wal"
)

// The log on a disk that loses what was not synced: groups append,
// truncate and save terms and votes concurrently, as the quorum queues
// of a node do; a power cut comes at a random moment; the log is opened
// again and must hold everything it acknowledged, intact, and open
// whatever the cut tore.
//
// The log is opened as a node opens it. lazyfs refuses O_DIRECT, so the
// log writes through the page cache and syncs with fdatasync; the test
// checks that it falls back so. It crashes as often as it can in
// crashBudget, up to crashMost times; WAL_CRASHES sets an exact number instead, for longer
// runs, and WAL_CRASH_SEED the seed (default random; printed on
// failure). A seed replays the same workload and cut points; which
// writes a commit has made when the cut comes still depends on the
// scheduler.

const (
	crashBudget  = 40 * time.Second
	crashMost    = 3000
	crashLife    = 100
	crashGroups  = 3
	crashSegment = 32 << 10
	termKey      = "CurrentTerm"
	voteKey      = "LastVoteCand"
)

func TestCrashKeepsWhatWasAcknowledged(t *testing.T) {
	if err := lazyfs.Supported(); err != nil {
		t.Skipf("no lazyfs: %v", err)
	}
	crashes := envInt(t, "WAL_CRASHES", 0)
	budget := time.Duration(0)
	if crashes == 0 {
		crashes, budget = crashMost, crashBudget
	}
	seed := uint64(envInt(t, "WAL_CRASH_SEED", int(rand.Uint32())))
	r := rand.New(rand.NewPCG(seed, 1))
	c := newCrashRun(t, r)
	start := time.Now()
	for k := range crashes {
		if budget > 0 && time.Since(start) > budget {
			break
		}
		if err := c.cycle(); err != nil {
			t.Fatalf("WAL_CRASH_SEED=%d, crash %d: %v", seed, k, err)
		}
	}
	t.Logf("WAL_CRASH_SEED=%d: %d crashes in %v, %d entries acknowledged, %d writes dropped (%d crashes torn)",
		seed, c.cycles, time.Since(start).Round(time.Millisecond), c.acked.Load(), c.dropped, c.torn)
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// crashRun is a log on one lazyfs mount through many crashes (begun
// again every crashLife), and what the log acknowledged.
type crashRun struct {
	t       *testing.T
	m       *lazyfs.Mounted
	mnt     string // where m is mounted
	dir     string // the log's directory
	r       *rand.Rand
	groups  []*groupModel
	acked   atomic.Int64
	dropped int
	torn    int
	cycles  int
}

// groupModel is what one group's log must hold. Only its worker touches
// it while the log runs.
type groupModel struct {
	id string
	// durable maps an index to the entry the log acknowledged and no
	// deletion has removed since.
	durable map[uint64][]byte
	// next is the index the next append takes; first the lowest kept.
	first, next uint64
	attempt     uint64 // numbers every append, so rewrites differ
	// term is the last term acknowledged, tried the highest attempted;
	// voted the term of the last vote acknowledged.
	term, tried, voted uint64
}

func newCrashRun(t *testing.T, r *rand.Rand) *crashRun {
	backing, mnt := t.TempDir(), t.TempDir()
	m, err := lazyfs.Mount(mnt, backing)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Error(err)
		}
	})
	c := &crashRun{t: t, m: m, mnt: mnt, r: r}
	c.fresh()
	return c
}

// fresh starts a new log, in a directory of its own, and its model.
// Every crashLife crashes the log is begun again: the cost of reopening
// one grows with the crashes it went through, and long runs would
// otherwise slow to a crawl.
func (c *crashRun) fresh() {
	c.dir = filepath.Join(c.mnt, fmt.Sprintf("wal-%d", c.cycles))
	c.groups = nil
	for k := range crashGroups {
		c.groups = append(c.groups, &groupModel{id: fmt.Sprintf("q%d", k), durable: map[uint64][]byte{},
			first: 1, next: 1})
	}
}

// cycle opens the log, checks it, runs the groups until a power cut at a
// random moment, and closes what is left.
func (c *crashRun) cycle() error {
	if c.cycles > 0 && c.cycles%crashLife == 0 {
		c.fresh()
	}
	c.cycles++
	l, err := wal.Open(c.dir, wal.Options{SegmentSize: crashSegment,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fmt.Errorf("open after a crash: %w", err)
	}
	if l.Direct() {
		l.Close()
		return errors.New("the log writes directly on a file system that refuses O_DIRECT")
	}
	for _, g := range c.groups {
		if err := g.check(l); err != nil {
			l.Close()
			return err
		}
	}
	// The cut comes after a random number of operations, with a seed of
	// its own for each worker, so a seed replays the same workload.
	var ops atomic.Int64
	cut := int64(1 + c.r.IntN(30))
	reached := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	errs := make([]error, len(c.groups))
	for k, g := range c.groups {
		wr := rand.New(rand.NewPCG(c.r.Uint64(), uint64(k)))
		wg.Go(func() {
			errs[k] = g.work(l, wr, func() {
				if ops.Add(1) == cut {
					once.Do(func() { close(reached) })
				}
			}, &c.acked)
		})
	}
	<-reached
	if c.r.IntN(2) == 0 {
		// Wait a moment for a commit under way: a cut while its writes
		// are held is the one that can tear them.
		for deadline := time.Now().Add(5 * time.Millisecond); c.m.Pending() == 0 && time.Now().Before(deadline); {
			runtime.Gosched()
		}
	}
	var tear *rand.Rand
	if c.r.IntN(2) == 0 {
		tear = c.r
		c.torn++
	}
	rep := c.m.Crash(tear)
	c.dropped += rep.Writes
	wg.Wait()
	l.Close() // fails: its files died with the crash
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if c.cycles%16 == 0 {
		return c.m.Remount()
	}
	c.m.Restart()
	return nil
}

// work runs one group until the log fails (the crash), calling op after
// each operation. Its error is a broken promise seen while running.
func (g *groupModel) work(l *wal.Log, r *rand.Rand, op func(), acked *atomic.Int64) error {
	h, err := l.Group(g.id)
	if err != nil {
		return nil // the crash came first
	}
	for {
		op()
		var err error
		switch p := r.IntN(100); {
		case p < 70:
			err = g.append(h, r, acked)
		case p < 80 && g.next-g.first > 24:
			// Raft compacting its log after a snapshot.
			upto := g.first + uint64(r.IntN(16))
			err = h.DeleteRange(g.first, upto)
			for i := g.first; i <= upto; i++ {
				delete(g.durable, i)
			}
			g.first = upto + 1
		case p < 85 && g.next-g.first > 4:
			// A follower cutting a tail the leader does not have.
			from := g.next - uint64(1+r.IntN(4))
			err = h.DeleteRange(from, g.next-1)
			for i := from; i < g.next; i++ {
				delete(g.durable, i)
			}
			g.next = from
		case p < 95:
			g.tried++
			err = h.SetUint64([]byte(termKey), g.tried)
			if err == nil {
				g.term = g.tried
				err = h.Set([]byte(voteKey), []byte(fmt.Sprintf("node-%d", g.tried)))
			}
			if err == nil {
				g.voted = g.tried
			}
		}
		if err != nil {
			return nil // the crash
		}
	}
}

// append stores a batch of entries at the end of the group's log.
func (g *groupModel) append(h *wal.Group, r *rand.Rand, acked *atomic.Int64) error {
	logs := make([]*raft.Log, 1+r.IntN(8))
	for k := range logs {
		g.attempt++
		size := r.IntN(600)
		if r.IntN(100) == 0 {
			size = crashSegment / 3 // crosses segments
		}
		i := g.next + uint64(k)
		logs[k] = &raft.Log{Index: i, Term: g.attempt, Type: raft.LogCommand, Data: payload(g.id, i, g.attempt, size)}
	}
	if err := h.StoreLogs(logs); err != nil {
		return err
	}
	for _, e := range logs {
		g.durable[e.Index] = e.Data
	}
	g.next += uint64(len(logs))
	acked.Add(int64(len(logs)))
	return nil
}

// payload is an entry's data: its group, index and attempt, then size
// bytes that follow from them, so that any entry read back can be told
// intact or not.
func payload(group string, index, attempt uint64, size int) []byte {
	b := fmt.Appendf(nil, "%s|%d|%d|", group, index, attempt)
	for j := range size {
		b = append(b, byte(index*31+uint64(j)*7+attempt))
	}
	return b
}

// intact tells whether data is a payload of group's entry index, with
// term as its attempt.
func intact(data []byte, group string, index, term uint64) bool {
	head := fmt.Appendf(nil, "%s|%d|%d|", group, index, term)
	if !bytes.HasPrefix(data, head) {
		return false
	}
	return bytes.Equal(data, payload(group, index, term, len(data)-len(head)))
}

// check compares the reopened log with the model and takes up the log's
// state for the next run: the entries and term that survived unasked
// are the member's from now on, as they would be for raft.
func (g *groupModel) check(l *wal.Log) error {
	h, err := l.Group(g.id)
	if err != nil {
		return err
	}
	first, _ := h.FirstIndex()
	last, _ := h.LastIndex()
	for i := range g.durable {
		if i < first || i > last {
			return fmt.Errorf("group %s lost acknowledged entry %d: the log holds %d-%d", g.id, i, first, last)
		}
	}
	for i := first; i <= last && last > 0; i++ {
		var got raft.Log
		if err := h.GetLog(i, &got); err != nil {
			return fmt.Errorf("group %s has a hole at %d in %d-%d: %w", g.id, i, first, last, err)
		}
		if want, ok := g.durable[i]; ok && !bytes.Equal(got.Data, want) {
			return fmt.Errorf("group %s entry %d reads %.40q, acknowledged as %.40q", g.id, i, got.Data, want)
		}
		if !intact(got.Data, g.id, i, got.Term) {
			return fmt.Errorf("group %s entry %d is damaged: %.40q", g.id, i, got.Data)
		}
	}
	if last > 0 {
		g.first, g.next = first, last+1
	}
	term, err := h.GetUint64([]byte(termKey))
	if err != nil && g.term > 0 {
		return fmt.Errorf("group %s lost its acknowledged term %d: %w", g.id, g.term, err)
	}
	if term < g.term || term > g.tried {
		return fmt.Errorf("group %s has term %d; acknowledged %d, tried up to %d", g.id, term, g.term, g.tried)
	}
	var voted uint64
	if vote, err := h.Get([]byte(voteKey)); err == nil {
		if _, err := fmt.Sscanf(string(vote), "node-%d", &voted); err != nil {
			return fmt.Errorf("group %s has vote %q: %w", g.id, vote, err)
		}
	} else if g.voted > 0 {
		return fmt.Errorf("group %s lost its acknowledged vote of term %d: %w", g.id, g.voted, err)
	}
	if voted < g.voted || voted > g.tried {
		return fmt.Errorf("group %s has a vote of term %d; acknowledged %d, tried up to %d", g.id, voted, g.voted, g.tried)
	}
	g.term, g.voted, g.tried = term, voted, max(term, g.tried)
	return nil
}
