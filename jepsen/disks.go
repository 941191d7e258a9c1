package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/warrenmq/warren/jepsen/lazyfs"
)

// disks are the nodes' data directories served through lazyfs, when the
// run has the lose-unsynced fault: each node's writes are held until it
// syncs them, and the fault drops what it had not, as a power cut of that
// node's machine does. The files live in data.disk beside each node's
// data directory, where they stay for the post-mortem.
type disks struct {
	mounts []*lazyfs.Mounted
}

// mountDisks mounts a lazyfs at each node's data directory (named as
// startCluster names them), before the nodes start.
func mountDisks(dir string, n int) (*disks, error) {
	if err := lazyfs.Supported(); err != nil {
		return nil, fmt.Errorf("the lose-unsynced fault: %w", err)
	}
	d := &disks{}
	for i := range n {
		nodeDir := filepath.Join(dir, fmt.Sprintf("warren-%d", i))
		backing, data := filepath.Join(nodeDir, "data.disk"), filepath.Join(nodeDir, "data")
		for _, p := range []string{backing, data} {
			if err := os.MkdirAll(p, 0o755); err != nil {
				d.close()
				return nil, err
			}
		}
		m, err := lazyfs.Mount(data, backing)
		if err != nil {
			d.close()
			return nil, err
		}
		d.mounts = append(d.mounts, m)
	}
	return d, nil
}

// close unmounts every node's data directory; the nodes have stopped.
func (d *disks) close() error {
	var errs []error
	for _, m := range d.mounts {
		errs = append(errs, m.Unmount())
	}
	return errors.Join(errs...)
}

// loseUnsynced kills node i, drops the writes it had not synced (tear
// nil), or keeps a random in-order prefix of each file's, drawn from
// tear (a torn write-back), and remounts its data directory, so that the
// kernel keeps nothing of before: the node's machine lost power and
// rebooted. The caller starts the node again.
func (c *cluster) loseUnsynced(i int, tear *rand.Rand) error {
	if c.disks == nil {
		return errors.New("the lose-unsynced fault needs the nodes' data on lazyfs")
	}
	if err := c.nodes[i].kill(); err != nil {
		return err
	}
	m := c.disks.mounts[i]
	rep := m.Crash(tear)
	c.log.Info("lose-unsynced", "node", c.nodes[i].name, "files", rep.Files, "writes_dropped", rep.Writes, "torn", tear != nil)
	return m.Remount()
}
