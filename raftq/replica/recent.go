package replica

import (
	"sync"

	"github.com/warrenmq/warren/cluster/queue"
)

// recentBudget bounds the bytes of message payloads a replica keeps in
// memory for delivery. Past it, the oldest are dropped and read back from
// the log when their turn comes.
const recentBudget = 4 << 20

// recentMessages holds the payloads of messages enqueued recently, so that
// delivering one soon after it arrived does not read it back from disk. A
// message leaves on its first delivery; a redelivery reads the log.
type recentMessages struct {
	mu    sync.Mutex
	byIdx map[uint64][]byte
	order []uint64 // indexes in arrival order; some already taken
	head  int
	bytes int
}

func (c *recentMessages) put(index uint64, payload []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byIdx == nil {
		c.byIdx = make(map[uint64][]byte)
	}
	c.byIdx[index] = payload
	c.order = append(c.order, index)
	c.bytes += len(payload)
	for c.bytes > recentBudget && c.head < len(c.order) {
		old := c.order[c.head]
		c.head++
		if p, ok := c.byIdx[old]; ok {
			c.bytes -= len(p)
			delete(c.byIdx, old)
		}
	}
	if c.head > 1024 && c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}

// take returns the decoded message for index and forgets it, or nil.
func (c *recentMessages) take(index uint64) *queue.Message {
	c.mu.Lock()
	p, ok := c.byIdx[index]
	if ok {
		delete(c.byIdx, index)
		c.bytes -= len(p)
	}
	if len(c.byIdx) == 0 {
		c.order, c.head = c.order[:0], 0
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	m, err := decodeMessage(p)
	if err != nil {
		return nil
	}
	return m
}
