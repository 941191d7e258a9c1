package server

import (
	"sync"
	"time"

	"github.com/warrenmq/warren/amqp/wire"
)

// outItem is one method to send, with its content when it has one.
type outItem struct {
	channel uint16
	method  wire.Method
	props   *wire.Properties // nil unless the method carries content
	body    []byte
}

// outboxHigh is the number of queued outbound bytes above which the
// connection stops taking work: the reader stops reading client frames and
// consumers are told to pause (Deliver returns false). A slow client thus
// slows its own traffic instead of growing the broker's memory.
const outboxHigh = 1 << 20

// outbox queues frames for the connection's writer goroutine. Anyone may
// push (the reader, queue engines delivering); only the writer writes to
// the socket, so a slow client never blocks a queue.
type outbox struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled when the writer drains or the outbox closes
	items   []outItem
	spare   []outItem
	bytes   int
	closed  bool
	wake    chan struct{}
	confirm []*channel  // channels with publisher confirms to send
	paused  []*consumer // consumers to resume after the next drain
}

func newOutbox() *outbox {
	o := &outbox{wake: make(chan struct{}, 1)}
	o.cond = sync.NewCond(&o.mu)
	return o
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// push queues it and reports whether the outbox is still below its high
// watermark.
func (o *outbox) push(it outItem) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pushLocked(it)
}

func (o *outbox) pushLocked(it outItem) bool {
	if o.closed {
		return true
	}
	o.items = append(o.items, it)
	o.bytes += 64 + len(it.body)
	o.signal()
	return o.bytes < outboxHigh
}

// pause records a consumer to resume once the writer has drained.
func (o *outbox) pause(c *consumer) {
	o.mu.Lock()
	o.paused = append(o.paused, c)
	o.mu.Unlock()
	o.signal()
}

// confirmsReady asks the writer to send ch's publisher confirms. They are
// collected under the outbox lock, after every frame pushed before them,
// so that a basic.return always precedes its publish's confirm.
func (o *outbox) confirmsReady(ch *channel) {
	o.mu.Lock()
	o.confirm = append(o.confirm, ch)
	o.mu.Unlock()
	o.signal()
}

// waitBelowHigh blocks the reader while the client is not reading.
func (o *outbox) waitBelowHigh() {
	o.mu.Lock()
	for o.bytes >= outboxHigh && !o.closed {
		o.cond.Wait()
	}
	o.mu.Unlock()
}

func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
	o.signal()
}

// take hands the writer everything queued, with publisher confirms
// appended, and the consumers to resume.
func (o *outbox) take() (items []outItem, paused []*consumer, closed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	items = o.items
	o.items = o.spare[:0]
	o.spare = nil
	for _, ch := range o.confirm {
		items = ch.pub.confirms.appendConfirms(items, ch.id, &ch.c.stats)
	}
	o.confirm = o.confirm[:0]
	paused = o.paused
	o.paused = nil
	o.bytes = 0
	o.cond.Broadcast()
	return items, paused, o.closed
}

// recycle returns a drained slice for reuse.
func (o *outbox) recycle(items []outItem) {
	clear(items)
	o.mu.Lock()
	if o.spare == nil {
		o.spare = items[:0]
	}
	o.mu.Unlock()
}

// writeLoop is the connection's only socket writer. It also sends
// heartbeats when the connection has been quiet for half the interval.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	var tick <-chan time.Time
	if c.heartbeat > 0 {
		t := time.NewTicker(c.heartbeat / 2)
		defer t.Stop()
		tick = t.C
	}
	wroteSinceTick := false
	for {
		select {
		case <-c.out.wake:
		case <-tick:
			if !wroteSinceTick {
				c.nc.SetWriteDeadline(time.Now().Add(2 * c.heartbeat))
				if err := c.w.WriteHeartbeat(); err == nil {
					err = c.w.Flush()
				}
			}
			wroteSinceTick = false
			continue
		}
		items, paused, closed := c.out.take()
		if len(items) > 0 {
			if c.heartbeat > 0 {
				c.nc.SetWriteDeadline(time.Now().Add(2 * c.heartbeat))
			}
			if err := c.writeItems(items); err != nil {
				c.log.Debug("write failed; closing connection", "err", err)
				c.nc.Close()
				c.out.close()
				return
			}
			wroteSinceTick = true
		}
		c.out.recycle(items)
		for _, p := range paused {
			p.resume()
		}
		if closed {
			return
		}
	}
}

func (c *conn) writeItems(items []outItem) error {
	for i := range items {
		it := &items[i]
		var err error
		if it.props != nil {
			err = c.w.WriteContent(it.channel, it.method, it.props, it.body, c.frameMax)
		} else {
			err = c.w.WriteMethod(it.channel, it.method)
		}
		if err != nil {
			return err
		}
	}
	return c.w.Flush()
}
