package classic

import "github.com/warrenmq/warren/cluster/queue"

// consumer is the queue's record of one attached queue.Consumer.
type consumer struct {
	c        queue.Consumer
	tag      string
	noAck    bool
	prefetch uint32 // 0: unlimited
	level    *level

	// unsettled counts deliveries this consumer holds and has not settled;
	// it is what prefetch limits.
	unsettled uint32
	// blocked is set when Deliver returned false, cleared by Resume.
	blocked bool
	// attached is false once the consumer is cancelled or the queue deleted;
	// its unsettled deliveries may outlive it and still point here.
	attached bool
	// inLine says the consumer is standing in its level's line.
	inLine bool
}

// hasCredit says whether prefetch allows one more delivery. No-ack consumers
// settle on delivery, so prefetch never holds them back.
func (c *consumer) hasCredit() bool {
	return c.noAck || c.prefetch == 0 || c.unsettled < c.prefetch
}

// canReceive says whether the consumer may be handed a message now.
func (c *consumer) canReceive() bool {
	return c.attached && !c.blocked && c.hasCredit()
}
