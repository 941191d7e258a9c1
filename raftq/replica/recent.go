package replica

import (
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/raftq/queue"
)

// recentBudget bounds the bytes of message payloads a replica keeps in
// memory for delivery. Past it, the oldest are dropped and read back from
// the log when their turn comes.
const recentBudget = 4 << 20

// DefaultPayloadCache is the node-wide bound NewPayloadCache is usually
// given: 64 busy queues' worth of recentBudget.
const DefaultPayloadCache = 256 << 20

// PayloadCache bounds the payloads all the replicas of a node keep at hand
// together (Config.Payloads): a thousand queues with a backlog and no
// consumer would otherwise hold recentBudget each, gigabytes that are
// read back from the log anyway once a consumer comes. A replica that
// finds it full keeps a new payload only in the log.
type PayloadCache struct {
	limit int64
	used  atomic.Int64
}

// NewPayloadCache returns a bound of limit bytes.
func NewPayloadCache(limit int64) *PayloadCache { return &PayloadCache{limit: limit} }

// Used is the bytes the replicas keep now.
func (p *PayloadCache) Used() int64 { return p.used.Load() }

// Limit is the bound.
func (p *PayloadCache) Limit() int64 { return p.limit }

// recentMessages holds the payloads of messages enqueued recently, so that
// delivering one soon after it arrived does not read it back from disk. A
// message leaves on its first delivery; a redelivery reads the log. Only
// a leader keeps them (it is the one that delivers): from onLeading on, and
// it forgets them when it stops leading.
type recentMessages struct {
	mu sync.Mutex
	// on: the replica leads. The FSM goroutine checks the leadership
	// before it puts, but the leadership may go between that check and
	// the put: clear turns this off first, so nothing comes in after.
	on     bool
	byIdx  map[uint64][]byte
	order  []uint64 // indexes in arrival order; some already taken
	head   int
	bytes  int
	shared *PayloadCache // nil: only recentBudget bounds it
}

func (c *recentMessages) put(index uint64, payload []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on || c.shared != nil && c.shared.used.Load()+int64(len(payload)) > c.shared.limit {
		return // the node keeps enough: this one is read from the log
	}
	if c.byIdx == nil {
		c.byIdx = make(map[uint64][]byte)
	}
	c.byIdx[index] = payload
	c.order = append(c.order, index)
	c.add(len(payload))
	for c.bytes > recentBudget && c.head < len(c.order) {
		old := c.order[c.head]
		c.head++
		if p, ok := c.byIdx[old]; ok {
			c.add(-len(p))
			delete(c.byIdx, old)
		}
	}
	if c.head > 1024 && c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}

// add counts n more bytes kept (fewer if negative); c.mu held.
func (c *recentMessages) add(n int) {
	c.bytes += n
	if c.shared != nil {
		c.shared.used.Add(int64(n))
	}
}

// take returns the decoded message for index and forgets it, or nil.
func (c *recentMessages) take(index uint64) *queue.Message {
	c.mu.Lock()
	p, ok := c.byIdx[index]
	if ok {
		delete(c.byIdx, index)
		c.add(-len(p))
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

// start lets payloads in: the replica leads.
func (c *recentMessages) start() {
	c.mu.Lock()
	c.on = true
	c.mu.Unlock()
}

// clear forgets every payload, and the memory that held them, and keeps
// new ones out until start.
func (c *recentMessages) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = false
	c.add(-c.bytes)
	c.byIdx, c.order, c.head = nil, nil, 0
}
