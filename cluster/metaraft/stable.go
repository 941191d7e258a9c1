package metaraft

import (
	"sync"

	"github.com/hashicorp/raft"
)

// hashicorp/raft panics when it cannot save a term or a vote. On a full
// disk or an I/O error that would take the node down with a stack trace
// while it is still stopping; holdingStable instead tells the node
// (Config.OnStorageFailure) and keeps the failing write from ever
// returning, as the queues' write-ahead log does (raftq/wal's
// failure.go): the node exits. Without OnStorageFailure the error goes to
// raft as before.
type holdingStable struct {
	raft.StableStore
	fail func(error)
	once sync.Once
}

func (h *holdingStable) hold(err error) error {
	if err == nil || h.fail == nil {
		return err
	}
	h.once.Do(func() { go h.fail(err) })
	select {}
}

func (h *holdingStable) Set(key, val []byte) error {
	return h.hold(h.StableStore.Set(key, val))
}

func (h *holdingStable) SetUint64(key []byte, val uint64) error {
	return h.hold(h.StableStore.SetUint64(key, val))
}
