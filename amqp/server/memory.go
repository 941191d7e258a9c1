package server

import "github.com/warrenmq/warren/amqp"

// waitForMemory holds a publishing connection while the node's memory
// alarm is on, as RabbitMQ does: the client is told with
// connection.blocked (if it announced the capability), and the reader
// stops reading its socket, so TCP backpressure reaches the publisher
// instead of the broker's memory growing. Consumers on other connections
// keep draining queues, which clears the alarm.
func (c *conn) waitForMemory() error {
	alarm := c.s.broker.MemoryAlarm()
	if alarm == nil {
		return nil
	}
	c.log.Warn("publisher blocked by the memory alarm", "held_bytes", c.s.broker.MemoryUsed())
	c.blocked.Store(true)
	defer c.blocked.Store(false)
	if c.caps.connectionBlocked {
		c.out.push(outItem{method: &amqp.ConnectionBlocked{Reason: "low on memory"}})
	}
	for alarm != nil {
		select {
		case <-alarm:
		case e := <-c.forced:
			return e
		}
		alarm = c.s.broker.MemoryAlarm()
	}
	if c.caps.connectionBlocked {
		c.out.push(outItem{method: &amqp.ConnectionUnblocked{}})
	}
	c.log.Info("publisher unblocked")
	return nil
}
