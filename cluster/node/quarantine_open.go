package node

import (
	"fmt"
	"log/slog"

	"github.com/warrenmq/warren/raftq/replica"
	"github.com/warrenmq/warren/raftq/wal"
)

// openQueuesLog opens the node's write-ahead log for its queues. A log
// found damaged (wal.ErrCorrupt) is set aside and every group it held is
// quarantined (quarantine.go); the node starts on a new, empty log.
func (c *clusterNode) openQueuesLog(dataDir string, onStorageFailure func(error), log *slog.Logger) (*wal.Log, error) {
	var err error
	if c.quar, err = openQuarantine(dataDir, c.log); err != nil {
		return nil, err
	}
	qlog, err := replica.OpenNodeWAL(dataDir, log.With("component", "wal"), onStorageFailure)
	if !replica.IsDamaged(err) {
		return qlog, err
	}
	if err := c.quar.setAsideLog(dataDir, err); err != nil {
		return nil, fmt.Errorf("quarantine the damaged write-ahead log: %w", err)
	}
	return replica.OpenNodeWAL(dataDir, log.With("component", "wal"), onStorageFailure)
}
