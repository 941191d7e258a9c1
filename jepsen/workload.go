package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// workload is the clients: on every node a producer publishing persistent
// messages with confirms to the queues in turn, and a consumer with manual
// acks on every queue. Clients reconnect to their own node whenever their
// connection fails, as an application would.
type workload struct {
	log    *slog.Logger
	h      *history
	queues []string
	// sleepy are queues used in bursts with idle gaps, long enough for
	// them to hibernate in between (bursts).
	sleepy []string
	// expiring are queues the producers publish to and nobody consumes:
	// their messages expire (x-message-ttl) and are dead-lettered,
	// at-least-once, to the queue of the same position in dead, which
	// the consumers empty.
	expiring, dead []string
	// single are queues with a single active consumer, produced to and
	// consumed like queues (a consumer on every node, one active), but
	// not in the afterwards round (basic.get is refused on them).
	single []string
	// ordered are more single active consumer queues, each with one
	// producer (the node of its position, modulo the cluster's size),
	// whose first deliveries the checker holds to publish order
	// (order.go), as it does the single queues' per publishing channel.
	ordered []string
	// large are queues whose bodies span several frames (large.go),
	// produced to and consumed like queues, every delivery checked byte
	// for byte.
	large []string
	// rate is each producer's messages per second.
	rate int
	// rpc is the RPC workload's history (rpc.go); rpcRate each node's
	// client's requests per second, 0 for no RPC workload.
	rpc     *rpcHistory
	rpcRate int
}

func (w *workload) dial(nd *node) (*amqp091.Connection, *amqp091.Channel, error) {
	conn, err := amqp091.DialConfig(nd.uri(), amqp091.Config{
		Dial:      amqp091.DefaultDial(2 * time.Second),
		Heartbeat: 2 * time.Second,
		FrameSize: frameMax,
	})
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, ch, nil
}

// expiringTTL is how long a message waits in an expiring queue before it
// is dead-lettered.
const expiringTTL = 200

// all is every queue the workload uses, each dead-letter queue before
// the queues that dead-letter to it.
func (w *workload) all() []string {
	all := slices.Concat(w.queues, w.sleepy, w.dead, w.expiring, w.single, w.ordered, w.large)
	if w.rpcRate > 0 {
		all = append(all, rpcQueue)
	}
	return all
}

// producedBy are the queues the producer of the node at index i of n
// publishes to in turn: every node's the shared ones, and each ordered
// queue has one producer.
func (w *workload) producedBy(i, n int) []string {
	qs := slices.Concat(w.queues, w.expiring, w.single, w.large)
	for k, q := range w.ordered {
		if k%n == i {
			qs = append(qs, q)
		}
	}
	return qs
}

// consumed are the queues the consumers take messages from.
func (w *workload) consumed() []string {
	return slices.Concat(w.queues, w.dead, w.single, w.ordered, w.large)
}

// expectations are the workloads this run has, for the checker.
func (w *workload) expectations(crashing bool) expectations {
	return expectations{Ordered: slices.Concat(w.single, w.ordered), Large: w.large, Crashing: crashing}
}

// singleDisconnectedTimeout is the single active consumer queues'
// x-consumer-disconnected-timeout.
const singleDisconnectedTimeout = 5 * time.Second

// arguments are queue q's declaration arguments.
func (w *workload) arguments(q string) amqp091.Table {
	args := amqp091.Table{"x-queue-type": "quorum"}
	if i := slices.Index(w.expiring, q); i >= 0 {
		args["x-message-ttl"] = int32(expiringTTL)
		args["x-dead-letter-exchange"] = ""
		args["x-dead-letter-routing-key"] = w.dead[i]
		args["x-dead-letter-strategy"] = "at-least-once"
		args["x-overflow"] = "reject-publish" // at-least-once needs it
	}
	if slices.Contains(w.single, q) || slices.Contains(w.ordered, q) {
		// The active consumer's node failing keeps its place, and what
		// it holds, for the timeout (suspended): long enough to come
		// back from a short fault, short enough not to stall the run.
		args["x-single-active-consumer"] = true
		args["x-consumer-disconnected-timeout"] = int32(singleDisconnectedTimeout / time.Millisecond)
	}
	return args
}

// dialConfirm is dial with the channel in confirm mode.
func (w *workload) dialConfirm(nd *node) (*amqp091.Connection, *amqp091.Channel, error) {
	conn, ch, err := w.dial(nd)
	if err != nil {
		return nil, nil, err
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, ch, nil
}

// inspect is the ID of a delivery from q and, for a queue of multi-frame
// bodies, how its content differs from what was published ("" intact).
func (w *workload) inspect(q string, d amqp091.Delivery) (id uint64, corrupt string) {
	if slices.Contains(w.large, q) {
		return inspectLarge(d)
	}
	return w.messageID(d.Body), ""
}

// messageID is the ID a producer wrote in a message's body; 0, which no
// producer hands out (so the checker calls it unexpected), for a body that
// holds none.
func (w *workload) messageID(body []byte) uint64 {
	id, err := strconv.ParseUint(string(body), 10, 64)
	if err != nil {
		w.log.Error("a delivery that no producer wrote", "body", string(body))
		return 0
	}
	return id
}

// declare creates the quorum queues through the first node that takes
// the declarations (the dead-letter queues before the queues that
// dead-letter to them).
func (w *workload) declare(ctx context.Context, c *cluster) error {
	var err error
	for ctx.Err() == nil {
		for _, nd := range c.nodes {
			var conn *amqp091.Connection
			var ch *amqp091.Channel
			conn, ch, err = w.dial(nd)
			if err != nil {
				continue
			}
			for _, q := range w.all() {
				if _, err = ch.QueueDeclare(q, true, false, false, false, w.arguments(q)); err != nil {
					break
				}
			}
			conn.Close()
			if err == nil {
				return nil
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("declare the queues: %w", errors.Join(err, ctx.Err()))
}

// produce publishes through nd to produced in turn until ctx ends. Each
// connection is a channel of its own for the order check: order is
// promised per publishing channel.
func (w *workload) produce(ctx context.Context, nd *node, produced []string) {
	interval := time.Second / time.Duration(w.rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	n := 0
	for incarnation := 1; ctx.Err() == nil; incarnation++ {
		conn, ch, err := w.dialConfirm(nd)
		if err != nil {
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		channel := fmt.Sprintf("%s/%d", nd.name, incarnation)
		pending, done := awaitConfirms(4096, w.h.confirm)
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
			if ctx.Err() != nil {
				break
			}
			q := produced[n%len(produced)]
			id := w.h.publishOn(q, nd.name, channel)
			n++
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, w.publishing(q, id))
			if err != nil {
				// Not sent, or not knowably: the ID stays unconfirmed.
				break
			}
			pending <- confirmWait{id, dc}
		}
		// Give outstanding confirms a moment before closing settles them.
		if ctx.Err() != nil {
			sleep(context.Background(), 2*time.Second)
		}
		conn.Close()
		close(pending)
		<-done
	}
}

// publishing is message id's publishing to q: its ID as the body, or for
// a queue of multi-frame bodies one of those (recorded with its length).
func (w *workload) publishing(q string, id uint64) amqp091.Publishing {
	if slices.Contains(w.large, q) {
		p, n := largePublishing(id)
		w.h.sized(id, n)
		return p
	}
	body := strconv.FormatUint(id, 10)
	return amqp091.Publishing{DeliveryMode: amqp091.Persistent, MessageId: body, Body: []byte(body)}
}

type confirmWait struct {
	id uint64
	dc *amqp091.DeferredConfirmation
}

// awaitConfirms judges a connection's confirms in publish order, in one
// goroutine: confirm gets the ID of each acked one. Closing the
// connection settles every pending one as not acked, so the goroutine
// ends, closing done, once pending is closed and the connection gone.
func awaitConfirms(capacity int, confirm func(id uint64)) (pending chan<- confirmWait, done <-chan struct{}) {
	ch := make(chan confirmWait, capacity)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for p := range ch {
			<-p.dc.Done()
			if p.dc.Acked() {
				confirm(p.id)
			}
		}
	}()
	return ch, finished
}

// queued is a delivery and the queue it came from.
type queued struct {
	queue string
	amqp091.Delivery
}

// consumerPrefetch is the consumers' basic.qos prefetch count.
const consumerPrefetch = 32

// consume takes every queue's messages through nd until ctx ends,
// recording each delivery, the queue it came from, and its ack's outcome.
func (w *workload) consume(ctx context.Context, nd *node) {
	for ctx.Err() == nil {
		conn, ch, err := w.dial(nd)
		if err == nil {
			err = ch.Qos(consumerPrefetch, 0, false)
		}
		var merged chan queued
		if err == nil {
			merged = make(chan queued)
			var wg sync.WaitGroup
			for _, q := range w.consumed() {
				var ds <-chan amqp091.Delivery
				if ds, err = ch.ConsumeWithContext(ctx, q, "", false, false, false, false, nil); err != nil {
					break
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for d := range ds {
						merged <- queued{q, d}
					}
				}()
			}
			go func() { wg.Wait(); close(merged) }()
		}
		if err != nil {
			if conn != nil {
				conn.Close()
			}
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		a := acks{h: w.h}
		// A basic.qos every second is a round trip that shows the broker
		// read the acks before it: a message it hands out again after
		// that is a duplicate (history.check).
		prove := time.NewTicker(time.Second)
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case <-prove.C:
				if len(a.pending) == 0 {
					continue
				}
				if err := ch.Qos(consumerPrefetch, 0, false); err != nil {
					a.pending = a.pending[:0] // unconfirmed: the channel went first
					break loop
				}
				a.roundTrip()
			case d, ok := <-merged:
				if !ok {
					break loop
				}
				id, corrupt := w.inspect(d.queue, d.Delivery)
				ref := w.h.deliverChecked(id, d.queue, nd.name, d.Redelivered, corrupt)
				a.ack(d, ref)
			}
		}
		prove.Stop()
		// A clean close is a round trip after every ack: the broker read
		// them all, unless it had closed the channel (it discards what
		// comes on a channel it closed).
		open := !ch.IsClosed()
		if conn.Close() == nil && open {
			a.roundTrip()
		}
		for range merged { // let the forwarding goroutines end
		}
	}
}

// ready sums the queues' ready messages as one node reports them.
func (w *workload) ready(nd *node) (int, error) {
	conn, ch, err := w.dial(nd)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	total := 0
	for _, q := range w.all() {
		st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			return 0, err
		}
		total += st.Messages
	}
	return total, nil
}

// burstSize is how many messages a burst publishes.
const burstSize = 5

// bursts uses the sleepy queues through nd: after a pause of 7 to 12 s it
// publishes burstSize messages with confirms to one of them (while run
// lasts), then empties every sleepy queue with basic.get, acking each
// message, until ctx ends. Between bursts nothing uses them, so they
// hibernate, and each burst, get or redeclare wakes them: the wake-ups
// meet the nemesis's faults.
func (w *workload) bursts(run, ctx context.Context, nd *node, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	for n := 0; ctx.Err() == nil; n++ {
		sleep(ctx, 7*time.Second+time.Duration(rng.Int64N(int64(5*time.Second))))
		if ctx.Err() != nil {
			return
		}
		conn, ch, err := w.dial(nd)
		if err != nil {
			continue
		}
		if run.Err() == nil && ch.Confirm(false) == nil {
			w.burst(run, ch, nd, w.sleepy[n%len(w.sleepy)])
		}
		w.getAll(ctx, ch, nd, w.sleepy) // a failure ends this round; the next dials again
		conn.Close()
	}
}

// burst publishes burstSize messages to q and waits for their confirms.
func (w *workload) burst(ctx context.Context, ch *amqp091.Channel, nd *node, q string) {
	var waits []confirmWait
	for range burstSize {
		id := w.h.publish(q, nd.name)
		body := strconv.FormatUint(id, 10)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, MessageId: body, Body: []byte(body),
		})
		if err != nil {
			break // not sent, or not knowably: the ID stays unconfirmed
		}
		waits = append(waits, confirmWait{id, dc})
	}
	wctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	for _, p := range waits {
		if ok, err := p.dc.WaitContext(wctx); err == nil && ok {
			w.h.confirm(p.id)
		}
	}
}

// getAll empties queues through ch with basic.get, recording each
// message, the queue it came from and its ack's outcome, until a get or
// an ack fails.
func (w *workload) getAll(ctx context.Context, ch *amqp091.Channel, nd *node, queues []string) error {
	a := acks{h: w.h}
	for _, q := range queues {
		for ctx.Err() == nil {
			d, ok, err := ch.Get(q, false)
			if err != nil {
				return fmt.Errorf("get from %s: %w", q, err)
			}
			// The answer came after every earlier ack on the channel.
			a.roundTrip()
			if !ok {
				break
			}
			ref := w.h.deliver(w.messageID(d.Body), q, nd.name, d.Redelivered)
			if err := a.ack(d, ref); err != nil {
				return fmt.Errorf("ack on %s: %w", q, err)
			}
		}
	}
	return ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
