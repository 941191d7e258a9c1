package main

import (
	"context"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Crashing consumers. An application that dies while holding deliveries
// never closes its connection: its socket just goes. On every node a
// consumer takes a few deliveries with manual acks, acks some of them
// (and waits for a round trip, so that the broker has read those acks),
// keeps the rest, then drops its TCP connection without connection.close,
// half the time with a reset, half with a plain close. Every message it
// kept must come again, flagged redelivered, to another consumer, and
// none it acked may.

// crashPrefetch is a crashing consumer's prefetch: the most it can hold.
const crashPrefetch = 16

// crashTake is the longest a crashing consumer waits for its deliveries
// before it drops its connection with what it has.
const crashTake = time.Second

// crashing runs nd's crashing consumer until ctx ends: a connection, a
// few deliveries, a drop, then a pause of about every.
func (w *workload) crashing(ctx context.Context, nd *node, every time.Duration, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	queues := slices.Concat(w.queues, w.large)
	for ctx.Err() == nil {
		w.crashOnce(ctx, nd, queues[rng.IntN(len(queues))], rng)
		sleep(ctx, every/2+time.Duration(rng.Int64N(int64(every)+1)))
	}
}

// crashOnce consumes from q through nd, acks about half of what it takes,
// and drops its connection holding the rest.
func (w *workload) crashOnce(ctx context.Context, nd *node, q string, rng *rand.Rand) {
	var raw net.Conn
	dial := amqp091.DefaultDial(2 * time.Second)
	conn, err := amqp091.DialConfig(nd.uri(), amqp091.Config{
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := dial(network, addr)
			raw = c
			return c, err
		},
		Heartbeat: 2 * time.Second,
		FrameSize: frameMax,
	})
	if err != nil {
		return
	}
	// Whatever happens below, the connection ends without a close.
	defer drop(raw, rng.IntN(2) == 0)
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	if err := ch.Qos(crashPrefetch, 0, false); err != nil {
		return
	}
	ds, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		return
	}
	// Once dropped, what the client had buffered goes unread: the
	// broker must hand it out again.
	defer func() {
		go func() {
			for range ds {
			}
		}()
	}()
	a := acks{h: w.h}
	var held []deliveryRef
	want := 1 + rng.IntN(crashPrefetch)
	timeout := time.NewTimer(crashTake)
	defer timeout.Stop()
take:
	for len(held)+len(a.pending) < want {
		select {
		case <-ctx.Done():
			break take
		case <-timeout.C:
			break take
		case d, ok := <-ds:
			if !ok {
				break take
			}
			id, corrupt := w.inspect(q, d)
			ref := w.h.deliverChecked(id, q, nd.name, d.Redelivered, corrupt)
			if rng.IntN(2) == 0 {
				if a.ack(d, ref) != nil {
					break take
				}
				continue
			}
			held = append(held, ref)
		}
	}
	// basic.qos is answered after the broker has read the acks before it.
	if len(a.pending) > 0 && ch.Qos(crashPrefetch, 0, false) == nil {
		a.roundTrip()
	}
	w.h.acked(ackAbandoned, held...)
}

// drop ends a connection's socket without AMQP's close: with a reset
// (SO_LINGER 0) or a plain FIN.
func drop(raw net.Conn, reset bool) {
	if raw == nil {
		return
	}
	if tcp, ok := raw.(*net.TCPConn); ok && reset {
		tcp.SetLinger(0)
	}
	raw.Close()
}
