package replica

import "hash/fnv"

// A consumer that attaches through a node other than the leader's, or
// that follows the leadership, has an ID its own node chose
// (ConsumerIDFor): the top 24 bits name that start of that node (NodeTag
// of BootOf), the rest are random. When gossip reports a node failed,
// gone or restarted, a leader lets go at once of that start's cancelled
// consumers, whose channels are gone (NodeGone).

const nodeTagShift = 40

// BootOf names one start of a node: its name and its gossip Boot.
func BootOf(name, boot string) string { return name + "/" + boot }

// NodeTag is the 24-bit tag of a node's start (BootOf) in the consumer
// IDs it chooses.
func NodeTag(node string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(node))
	s := h.Sum32()
	return (s ^ s>>24) & 0xffffff
}

// ConsumerIDFor returns a new consumer ID for a consumer on node.
func ConsumerIDFor(node string) uint64 {
	return uint64(NodeTag(node))<<nodeTagShift | randomID()&(1<<nodeTagShift-1) | 1
}

// consumerNode is the tag of the node that chose consumer ID id.
func consumerNode(id uint64) uint32 { return uint32(id >> nodeTagShift) }

// ConsumerTag is the NodeTag of the node start that chose consumer ID id.
func ConsumerTag(id uint64) uint32 { return consumerNode(id) }
