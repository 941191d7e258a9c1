package metaraft

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fullLogStore fails every write, as a log on a full disk does.
type fullLogStore struct{ *raft.InmemStore }

var errNoSpace = errors.New("write raft.db: no space left on device")

func (fullLogStore) StoreLog(*raft.Log) error      { return errNoSpace }
func (fullLogStore) StoreLogs([]*raft.Log) error   { return errNoSpace }
func (fullLogStore) DeleteRange(_, _ uint64) error { return errNoSpace }

// TestFailedLogWriteStopsTheNode: a metadata log write that fails tells
// the node once and never returns to raft, whose leader would otherwise
// step down and be elected again to fail again; without a failure
// handler the error goes to raft.
func TestFailedLogWriteStopsTheNode(t *testing.T) {
	told := make(chan error, 3)
	stable := &holdingStable{StableStore: raft.NewInmemStore(), fail: func(err error) { told <- err }}
	logs := &holdingLogs{LogStore: fullLogStore{raft.NewInmemStore()}, hold: stable}
	returned := make(chan struct{}, 3)
	go func() { logs.StoreLogs([]*raft.Log{{Index: 1}}); returned <- struct{}{} }()
	go func() { logs.StoreLog(&raft.Log{Index: 2}); returned <- struct{}{} }()
	go func() { logs.DeleteRange(1, 2); returned <- struct{}{} }()
	select {
	case err := <-told:
		if !errors.Is(err, errNoSpace) {
			t.Errorf("told %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the node was not told of the failed write")
	}
	select {
	case <-returned:
		t.Fatal("a failed write returned to raft")
	case err := <-told:
		t.Fatalf("told twice: %v", err)
	case <-time.After(200 * time.Millisecond):
	}

	bare := &holdingLogs{LogStore: fullLogStore{raft.NewInmemStore()}, hold: &holdingStable{}}
	if err := bare.StoreLogs([]*raft.Log{{Index: 1}}); !errors.Is(err, errNoSpace) {
		t.Errorf("without a handler: %v", err)
	}
	good := &holdingLogs{LogStore: raft.NewInmemStore(), hold: stable}
	if err := good.StoreLog(&raft.Log{Index: 1, Type: raft.LogCommand}); err != nil {
		t.Errorf("a write that works: %v", err)
	}
}
