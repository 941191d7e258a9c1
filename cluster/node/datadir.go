package node

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/catalog"
)

// A data directory belongs to one kind of node. A standalone node keeps
// its metadata in metadata.db; a cluster member keeps the replicated
// metadata group's log under meta/. Neither reads the other's: a
// standalone node's directory started as a cluster member formed an empty
// cluster and, finding the standalone queues' logs unknown to it, deleted
// them (removeOrphans) with every message; a member's directory started
// standalone showed an empty broker.
//
// One way across is safe and is taken: a standalone node restarted as a
// cluster of one under the name its queues' groups know it by (the
// broker's default node ID, which a standalone node always has: make run
// did this when it became a cluster of one). Its metadata becomes the
// metadata group's first snapshot (meta.SeedSnapshot), its queues' groups
// are opened as they are, and other nodes may join it afterwards. Every
// other crossing is refused at start, with what to do.

// standaloneMarker and memberMarker are the files that show which kind of
// node a data directory belongs to; a standalone node's metadata.db is
// renamed to migratedMarker once carried into a cluster.
const (
	standaloneMarker = "metadata.db"
	memberMarker     = "meta/raft.db"
	migratedMarker   = "metadata.db.migrated"
)

// checkDataDir refuses a data directory that holds the other kind of
// node's data, unless it is a standalone node's that this start (cfg) can
// carry into a cluster of one: then it returns that node's metadata, for
// the metadata group's first snapshot. A directory that holds both (a
// member's started standalone by an older version) belongs to the cluster.
func checkDataDir(dir string, cfg *ClusterConfig) (migrate *catalog.Snapshot, err error) {
	standalone, err := exists(filepath.Join(dir, standaloneMarker))
	if err != nil {
		return nil, err
	}
	clustered, err := exists(filepath.Join(dir, memberMarker))
	if err != nil {
		return nil, err
	}
	switch {
	case cfg != nil && standalone && !clustered:
		if cfg.NodeName != broker.DefaultNodeID || len(cfg.Join) > 0 || cfg.BootstrapExpect > 1 {
			return nil, fmt.Errorf("data directory %s holds a standalone node's data (%s): it becomes a cluster member only as a cluster of one named %s (--node-name %s, no --join, --bootstrap-expect 0 or 1; others may join it afterwards), which its queues know it by; start it so, or without --internal-addr, or give this node another --data-dir", dir, standaloneMarker, broker.DefaultNodeID, broker.DefaultNodeID)
		}
		return loadStandalone(dir)
	case cfg == nil && clustered:
		return nil, fmt.Errorf("data directory %s holds a cluster member's data (%s): a standalone node does not read it; start this node with its cluster settings (--internal-addr, --node-name, --join), or give the standalone node another --data-dir", dir, filepath.Dir(memberMarker)+"/")
	}
	return nil, nil
}

// loadStandalone reads a standalone node's metadata, with each replicated
// queue's record made a one-member group's, as a cluster records it (a
// standalone node of an older version left Members and ID empty).
func loadStandalone(dir string) (*catalog.Snapshot, error) {
	store, err := catalog.OpenBolt(dir)
	if err != nil {
		return nil, fmt.Errorf("read the standalone node's metadata: %w", err)
	}
	defer store.Close()
	snap, err := store.Load()
	if err != nil {
		return nil, fmt.Errorf("read the standalone node's metadata: %w", err)
	}
	for i := range snap.Queues {
		q := &snap.Queues[i]
		if len(q.Members) == 0 {
			q.Members, q.Leader = []string{broker.DefaultNodeID}, broker.DefaultNodeID
		}
		if q.ID == "" {
			q.ID = broker.GroupName(*q)
		}
	}
	return snap, nil
}

// retireStandalone renames a carried standalone node's metadata.db, once
// the cluster has started from it, so that the directory is a member's
// only (the file stays, for the operator).
func retireStandalone(dir string, log *slog.Logger) error {
	if err := os.Rename(filepath.Join(dir, standaloneMarker), filepath.Join(dir, migratedMarker)); err != nil {
		return fmt.Errorf("retire the standalone node's metadata: %w", err)
	}
	log.Info("a standalone node's data now serves a cluster of one", "node", broker.DefaultNodeID, "kept", migratedMarker)
	return nil
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("inspect data directory: %w", err)
	}
}
