package node

import (
	"context"
	"time"

	"github.com/warrenmq/warren/proto/memberpb"
)

// RemoveFromGroupOnly takes node out of quorum queue name's Raft group and
// leaves the queue's record as it was: a DeleteMember interrupted between
// its steps 2 and 3.
func (n *Node) RemoveFromGroupOnly(vhost, name, node string) error {
	rec, err := quorumRecord(n.broker, vhost, name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = n.cluster.change(ctx, rec.ID, rec.Members, memberpb.ChangeOp_REMOVE_SERVER, node, "")
	return err
}
