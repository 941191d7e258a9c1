package metaraft

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster/catalog"
)

// SeedSnapshot writes snap as the metadata group's first snapshot in dir,
// with a configuration of one voter, nodeID at addr: a standalone node's
// metadata carried into the cluster of one it becomes. Opened on dir, the
// group starts from that state, as if it had committed every record, and
// its one voter elects itself. dir must hold no Raft state yet.
func SeedSnapshot(dir, nodeID, addr string, snap *catalog.Snapshot) error {
	snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		return fmt.Errorf("meta: open snapshots: %w", err)
	}
	data, err := json.Marshal(persistedOf(snap, 1))
	if err != nil {
		return fmt.Errorf("meta: encode the seed: %w", err)
	}
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(nodeID), Address: raft.ServerAddress(addr)}}}
	_, peers := raft.NewInmemTransport(raft.ServerAddress(addr)) // encodes the configuration's legacy peer list
	sink, err := snaps.Create(raft.SnapshotVersionMax, 1, 1, conf, 1, peers)
	if err != nil {
		return fmt.Errorf("meta: create the seed snapshot: %w", err)
	}
	if _, err := sink.Write(data); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("meta: write the seed snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("meta: write the seed snapshot: %w", err)
	}
	return nil
}
