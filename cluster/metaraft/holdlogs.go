package metaraft

import "github.com/hashicorp/raft"

// holdingLogs does for the metadata log what holdingStable does for the
// term and vote. hashicorp/raft answers a leader's failed StoreLogs by
// stepping down; with its log the longest, the same node is soon elected
// again and fails again, so while one node's disk was full the cluster's
// metadata could not change (no queue declared, no user added). With
// OnStorageFailure set, a failed write tells the node, which stops, and
// never returns, as the queues' write-ahead log does; the other members
// elect a leader among themselves.
type holdingLogs struct {
	raft.LogStore
	hold *holdingStable // shares its once: the node is told one time
}

func (h *holdingLogs) StoreLog(l *raft.Log) error {
	return h.hold.hold(h.LogStore.StoreLog(l))
}

func (h *holdingLogs) StoreLogs(ls []*raft.Log) error {
	return h.hold.hold(h.LogStore.StoreLogs(ls))
}

func (h *holdingLogs) DeleteRange(min, max uint64) error {
	return h.hold.hold(h.LogStore.DeleteRange(min, max))
}
