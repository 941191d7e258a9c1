package replica

import (
	"path/filepath"
	"testing"

	"github.com/warrenmq/warren/raftq/wal"
)

// storage is where a test's replicas keep their Raft logs: a
// write-ahead log of the queue's own, or a node's write-ahead log shared
// by its groups (what nodes use). The replica tests that touch the log
// run on both.
type storage int

const (
	perQueueFiles storage = iota
	sharedLog
)

func (s storage) String() string {
	if s == sharedLog {
		return "shared"
	}
	return "files"
}

// eachStorage runs test once per storage, as subtests.
func eachStorage(t *testing.T, test func(t *testing.T, st storage)) {
	for _, st := range []storage{perQueueFiles, sharedLog} {
		t.Run(st.String(), func(t *testing.T) { test(t, st) })
	}
}

// testNode is one node's log storage; nil stands for a log per queue.
type testNode struct {
	path string
	log  *wal.Log
}

// node opens a node's storage of kind st, closed when the test ends
// (after the replicas, which tests close first).
func (st storage) node(t *testing.T) *testNode {
	if st != sharedLog {
		return nil
	}
	n := &testNode{path: filepath.Join(t.TempDir(), "wal")}
	n.open(t)
	t.Cleanup(func() {
		if err := n.log.Close(); err != nil {
			t.Errorf("close the node's log: %v", err)
		}
	})
	return n
}

func (n *testNode) open(t *testing.T) {
	t.Helper()
	l, err := wal.Open(n.path, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n.log = l
}

// configure makes cfg use the node's storage.
func (n *testNode) configure(cfg *Config) {
	if n != nil {
		cfg.WAL = n.log
	}
}

// restart closes and reopens the node's log, as a node restart
// does; its replicas must be closed.
func (n *testNode) restart(t *testing.T) {
	t.Helper()
	if n == nil {
		return
	}
	if err := n.log.Close(); err != nil {
		t.Fatal(err)
	}
	n.open(t)
}
