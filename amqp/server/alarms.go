package server

import "github.com/warrenmq/warren/amqp/wire"

// waitForAlarms holds a publishing connection while a resource alarm is in
// effect anywhere in the cluster, as RabbitMQ does: the client is told
// with connection.blocked (if it announced the capability) and the reason
// ("low on memory", "low on disk"), and the reader stops reading its
// socket, so TCP backpressure reaches the publisher instead of the node's
// memory or disk filling. Consumers on other connections keep draining
// queues, which clears a memory alarm.
func (c *conn) waitForAlarms() error {
	reason, changed := c.s.broker.Blocking()
	if changed == nil {
		return nil
	}
	c.log.Warn("publisher blocked by a resource alarm", "reason", reason)
	c.blocked.Store(true)
	defer c.blocked.Store(false)
	if c.caps.connectionBlocked {
		c.out.push(outItem{method: &wire.ConnectionBlocked{Reason: reason}})
	}
	for changed != nil {
		select {
		case <-changed:
		case e := <-c.forced:
			return e
		}
		_, changed = c.s.broker.Blocking()
	}
	if c.caps.connectionBlocked {
		c.out.push(outItem{method: &wire.ConnectionUnblocked{}})
	}
	c.log.Info("publisher unblocked")
	return nil
}
