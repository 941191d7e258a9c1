package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math/bits"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cmd/warren-perf/internal/ratelimit"
)

// stampHeader carries the send time when the body is too small (< 8 bytes) to hold it.
const stampHeader = "x-warren-perf-ts"

// producer publishes to one queue over its own connection and channel.
type producer struct {
	id    int
	cfg   *Config
	queue string
	conn  *amqp.Connection
	ch    *amqp.Channel
	stats *producerStats
	pace  *ratelimit.Waiter
	log   *log.Logger

	closed <-chan *amqp.Error // channel/connection close reason

	// Confirm window (only with --confirm > 0). window holds one token per unconfirmed
	// publish: the producer puts one in before publishing (blocking when N are in flight)
	// and the confirm listener takes one out per basic.ack/nack.
	window       chan struct{}
	confirmsDone chan struct{} // closed when the confirm listener exits (channel closed)
	// sendTimes[tag & mask] is the send time of the publish with that delivery tag. At most
	// len(window) tags are outstanding and the ring is at least that large, so a slot is only
	// rewritten after its confirm was read; atomics make the hand-over visible to the race
	// detector without relying on the client library's internal locking.
	sendTimes []atomic.Int64
	mask      uint64
	seq       uint64 // delivery tag of the last successful publish (tags start at 1)
}

func newProducer(id int, cfg *Config, conn *amqp.Connection, queue string,
	lim *ratelimit.Limiter, stats *producerStats, logger *log.Logger) (*producer, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("producer %d: open channel: %w", id, err)
	}
	p := &producer{
		id: id, cfg: cfg, queue: queue, conn: conn, ch: ch, stats: stats,
		pace: lim.NewWaiter(), log: logger,
		closed: ch.NotifyClose(make(chan *amqp.Error, 1)),
	}
	if cfg.Confirm > 0 {
		if err := ch.Confirm(false); err != nil {
			return nil, fmt.Errorf("producer %d: enable publisher confirms: %w", id, err)
		}
		ring := 1 << bits.Len(uint(cfg.Confirm-1)) // next power of two ≥ window
		p.window = make(chan struct{}, cfg.Confirm)
		p.confirmsDone = make(chan struct{})
		p.sendTimes = make([]atomic.Int64, ring)
		p.mask = uint64(ring - 1)
		// The client delivers confirms from its reader goroutine and gives up on a listener
		// that stays full for 5s (the confirm would be lost and the window never reopen).
		// At most Confirm acks can be pending, so this buffer never fills.
		go p.listenConfirms(ch.NotifyPublish(make(chan amqp.Confirmation, cfg.Confirm)))
	}
	if cfg.Mandatory {
		go p.countReturns(ch.NotifyReturn(make(chan amqp.Return, 64)))
	}
	go p.watchBlocked(conn.NotifyBlocked(make(chan amqp.Blocking, 4)))
	return p, nil
}

// listenConfirms records confirm latency and reopens the window, until the channel closes.
func (p *producer) listenConfirms(confirms <-chan amqp.Confirmation) {
	defer close(p.confirmsDone)
	for c := range confirms {
		now := nowNanos()
		if c.Ack {
			p.stats.confirmLatency.Record(now - p.sendTimes[c.DeliveryTag&p.mask].Load())
			p.stats.confirmed.Add(1)
		} else {
			p.stats.nacked.Add(1)
		}
		p.stats.lastConfirm.Store(now)
		<-p.window
	}
}

// countReturns counts basic.return (mandatory message with no queue to route to).
func (p *producer) countReturns(returns <-chan amqp.Return) {
	for range returns {
		p.stats.returned.Add(1)
	}
}

// watchBlocked reports connection.blocked: a stalled rate is otherwise hard to explain.
func (p *producer) watchBlocked(blocked <-chan amqp.Blocking) {
	for b := range blocked {
		if b.Active {
			p.log.Printf("producer %d: connection blocked by the broker: %s", p.id, b.Reason)
		} else {
			p.log.Printf("producer %d: connection unblocked", p.id)
		}
	}
}

// run publishes until ctx ends or --messages is reached, calls published, then waits up to
// drain for outstanding confirms (abandoned if abort ends) and closes the connection.
func (p *producer) run(ctx, abort context.Context, drain time.Duration, published func()) error {
	defer func() {
		closeConn(p.conn)
		if p.confirmsDone != nil {
			<-p.confirmsDone // final counts are complete once the listener has exited
		}
	}()
	err := p.publishLoop(ctx)
	published()
	if err != nil {
		return err
	}
	if p.window != nil {
		p.awaitConfirms(abort, time.Now().Add(drain))
	}
	return nil
}

func (p *producer) publishLoop(ctx context.Context) error {
	// One body per producer, reused for every message: only the 8-byte timestamp changes, so
	// the loop does not allocate per message (the client library still does internally).
	body := make([]byte, p.cfg.Size)
	for i := 8; i < len(body); i++ {
		body[i] = byte('a' + i%26) // not all zeros, in case anything on the path compresses
	}
	msg := amqp.Publishing{Body: body, DeliveryMode: amqp.Persistent}
	if p.cfg.TransientMessages {
		msg.DeliveryMode = amqp.Transient
	}
	small := len(body) < 8
	if small {
		msg.Headers = amqp.Table{stampHeader: int64(0)}
	}
	done := ctx.Done()
	for n := int64(0); p.cfg.Messages == 0 || n < p.cfg.Messages; n++ {
		select {
		case <-done:
			return nil
		default:
		}
		if p.pace.Wait(ctx) != nil {
			return nil
		}
		if p.window != nil {
			select {
			case p.window <- struct{}{}:
			case <-done:
				return nil
			case <-p.confirmsDone:
				return p.closeError(amqp.ErrClosed)
			}
		}
		ts := nowNanos()
		if small {
			msg.Headers[stampHeader] = ts // boxing allocates; only for sizes < 8
		} else {
			binary.BigEndian.PutUint64(body, uint64(ts))
		}
		if p.window != nil {
			p.sendTimes[(p.seq+1)&p.mask].Store(ts)
		}
		if err := p.ch.Publish("", p.queue, p.cfg.Mandatory, false, msg); err != nil {
			if ctx.Err() != nil {
				return nil // the connection was closed under us on shutdown
			}
			return p.closeError(err)
		}
		p.seq++
		p.stats.sent.Add(1)
		p.stats.lastSent.Store(ts)
	}
	return nil
}

// awaitConfirms waits until every publish is confirmed, the deadline passes, abort ends or
// the channel closes. Polling (every 2ms) keeps the listener free of extra signalling.
func (p *producer) awaitConfirms(abort context.Context, deadline time.Time) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for len(p.window) > 0 && time.Now().Before(deadline) {
		select {
		case <-abort.Done():
			return
		case <-p.confirmsDone:
			return
		case <-t.C:
		}
	}
	if n := len(p.window); n > 0 && abort.Err() == nil {
		p.log.Printf("producer %d: %d publishes still unconfirmed after the drain period", p.id, n)
	}
}

// closeError prefers the broker's close reason (e.g. NOT_FOUND, CONNECTION_FORCED) over the
// client's generic "channel/connection is not open".
func (p *producer) closeError(err error) error {
	select {
	case e, ok := <-p.closed:
		if ok && e != nil {
			return fmt.Errorf("producer %d (queue %q): closed by broker: %w", p.id, p.queue, e)
		}
	case <-time.After(100 * time.Millisecond):
	}
	return fmt.Errorf("producer %d (queue %q): publish: %w", p.id, p.queue, err)
}
