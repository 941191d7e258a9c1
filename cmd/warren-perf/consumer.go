package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// consumer consumes one queue over its own connection and channel and records end-to-end
// latency from the timestamp the producer embedded in each message.
type consumer struct {
	id         int
	cfg        *Config
	queue      string
	conn       *amqp.Connection
	ch         *amqp.Channel
	stats      *consumerStats
	deliveries <-chan amqp.Delivery
	closed     <-chan *amqp.Error
	cancelled  <-chan string
	// staleBefore: messages stamped earlier were sent before this run (left in the queue by
	// an earlier one); they are acked but not counted, or they would skew latency and make
	// "everything received" come true too early. 0 disables the filter.
	staleBefore int64

	unacked int    // deliveries not yet acked (--multi-ack)
	lastTag uint64 // delivery tag of the latest delivery
}

func newConsumer(id int, cfg *Config, conn *amqp.Connection, queue string,
	stats *consumerStats, staleBefore int64) (*consumer, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("consumer %d: open channel: %w", id, err)
	}
	c := &consumer{
		id: id, cfg: cfg, queue: queue, conn: conn, ch: ch, stats: stats, staleBefore: staleBefore,
		closed:    ch.NotifyClose(make(chan *amqp.Error, 1)),
		cancelled: ch.NotifyCancel(make(chan string, 1)),
	}
	if !cfg.AutoAck && cfg.Prefetch > 0 {
		if err := ch.Qos(cfg.Prefetch, 0, false); err != nil {
			return nil, fmt.Errorf("consumer %d: basic.qos %d: %w", id, cfg.Prefetch, err)
		}
	}
	tag := fmt.Sprintf("warren-perf-%d", id)
	c.deliveries, err = ch.Consume(queue, tag, cfg.AutoAck, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("consumer %d: consume from %q: %w", id, queue, err)
	}
	return c, nil
}

// run consumes until ctx ends, then acks what it holds and closes the connection.
func (c *consumer) run(ctx context.Context) error {
	defer closeConn(c.conn)
	for {
		select {
		case d, ok := <-c.deliveries:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return c.closeError()
			}
			if err := c.handle(&d); err != nil {
				return err
			}
		case <-ctx.Done():
			// Ack what we hold so a multi-ack tail is not redelivered to the next run.
			if c.unacked > 0 {
				_ = c.ch.Ack(c.lastTag, true)
			}
			return nil
		}
	}
}

func (c *consumer) handle(d *amqp.Delivery) error {
	now := nowNanos()
	ts, stamped := sendTime(d)
	if c.staleBefore != 0 && (!stamped || ts < c.staleBefore) {
		c.stats.stale.Add(1)
	} else {
		if stamped {
			c.stats.e2eLatency.Record(now - ts)
		}
		c.stats.received.Add(1)
		c.stats.lastReceived.Store(now)
	}
	if c.cfg.AutoAck {
		return nil
	}
	c.unacked++
	c.lastTag = d.DeliveryTag
	if c.unacked < c.cfg.MultiAck {
		return nil
	}
	c.unacked = 0
	if err := c.ch.Ack(d.DeliveryTag, c.cfg.MultiAck > 1); err != nil {
		return fmt.Errorf("consumer %d: ack: %w", c.id, err)
	}
	return nil
}

// sendTime extracts the producer's timestamp: the first 8 body bytes, or the header for
// bodies shorter than that.
func sendTime(d *amqp.Delivery) (int64, bool) {
	if len(d.Body) >= 8 {
		return int64(binary.BigEndian.Uint64(d.Body)), true
	}
	ts, ok := d.Headers[stampHeader].(int64)
	return ts, ok
}

// closeError explains why the delivery stream ended: broker cancel (queue deleted) or close.
// Both notification channels are also closed, without a value, on a normal close, hence ok.
func (c *consumer) closeError() error {
	cancelled, closed := c.cancelled, c.closed
	timeout := time.After(100 * time.Millisecond)
	for cancelled != nil || closed != nil {
		select {
		case _, ok := <-cancelled:
			if ok {
				return fmt.Errorf("consumer %d: cancelled by the broker (queue %q deleted?)", c.id, c.queue)
			}
			cancelled = nil
		case e, ok := <-closed:
			if ok && e != nil {
				return fmt.Errorf("consumer %d (queue %q): closed by broker: %w", c.id, c.queue, e)
			}
			closed = nil
		case <-timeout:
			cancelled, closed = nil, nil
		}
	}
	return fmt.Errorf("consumer %d (queue %q): delivery stream closed unexpectedly", c.id, c.queue)
}
