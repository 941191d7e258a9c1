package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A data directory belongs to one kind of node. A standalone node keeps
// its metadata in metadata.db; a cluster member keeps the replicated
// metadata group's log under meta/. Neither reads the other's: a
// standalone node's directory started as a cluster member formed an empty
// cluster and, finding the standalone queues' logs unknown to it, deleted
// them (removeOrphans) with every message; a member's directory started
// standalone showed an empty broker. A node refuses to start on the other
// kind's data instead, and says what to do.

// standaloneMarker and memberMarker are the files that show which kind of
// node a data directory belongs to.
const (
	standaloneMarker = "metadata.db"
	memberMarker     = "meta/raft.db"
)

// checkDataDir refuses a data directory that holds the other kind of
// node's data: member tells which kind is starting. A directory that holds
// both (a member's started standalone by an older version) belongs to the
// cluster.
func checkDataDir(dir string, member bool) error {
	standalone, err := exists(filepath.Join(dir, standaloneMarker))
	if err != nil {
		return err
	}
	clustered, err := exists(filepath.Join(dir, memberMarker))
	if err != nil {
		return err
	}
	switch {
	case member && standalone && !clustered:
		return fmt.Errorf("data directory %s holds a standalone node's data (%s): a cluster member does not read it, and would delete its queues' messages as unknown; start this node without --internal-addr to keep using it, or give the cluster member another --data-dir", dir, standaloneMarker)
	case !member && clustered:
		return fmt.Errorf("data directory %s holds a cluster member's data (%s): a standalone node does not read it; start this node with its cluster settings (--internal-addr, --node-name, --join), or give the standalone node another --data-dir", dir, filepath.Dir(memberMarker)+"/")
	}
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
