package node

import (
	"os"
	"path/filepath"
	"strings"
)

// A node's consumers carry the tag of the node's start (its gossip Boot,
// replica.BootOf) in their IDs, and a leader returns at once what the
// consumers of a start that is over hold (replica.Replica.NodeGone,
// replica.Config.StartGone). A node learns that another's start is over
// by seeing it come back with a new boot; but when every node restarted
// (the whole cluster killed at once), none saw another's earlier start,
// and their consumers' messages waited out the disconnected timeout,
// counted unacked, though no channel of theirs survived. So each node
// keeps its latest boots in its data directory and announces the ones
// before this start (membership.Meta.Previous): the others, and the node
// itself, count them over.

// bootsFile holds the node's latest boots, oldest first, one a line.
const bootsFile = "boots"

// maxPreviousBoots is how many earlier starts a node announces: enough
// for a node that restarted once more while the cluster came back, and
// few, as gossip carries a node's metadata in at most 512 bytes
// (memberlist's MetaMaxSize), addresses and all.
const maxPreviousBoots = 2

// recordBoot adds boot to the boots kept in dataDir and returns the ones
// before it, oldest first. A directory that cannot keep them (it is
// written before anything else that needs it) only loses the
// announcement: the earlier starts' consumers wait out the disconnected
// timeout, as before.
func recordBoot(dataDir, boot string) (previous []string, err error) {
	path := filepath.Join(dataDir, bootsFile)
	if b, err := os.ReadFile(path); err == nil {
		for _, l := range strings.Fields(string(b)) {
			previous = append(previous, l)
		}
	}
	if len(previous) > maxPreviousBoots {
		previous = previous[len(previous)-maxPreviousBoots:]
	}
	keep := append(previous[max(0, len(previous)-maxPreviousBoots+1):len(previous):len(previous)], boot)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return previous, err
	}
	_, err = f.WriteString(strings.Join(keep, "\n") + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	return previous, err
}
