package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// afterwardsRounds and afterwardsPause shape the check made once the
// cluster is healed and drained: rounds of publishing, each pause apart.
// The pause outlasts the nodes' default --queue-hibernate-after (5 s), so
// that the later rounds find idle queues asleep, reached through routers
// that forwarded to them before they slept.
const (
	afterwardsRounds  = 2
	afterwardsPause   = 8 * time.Second
	afterwardsConfirm = 30 * time.Second
)

// afterwards is the availability check. With every fault healed and every
// queue drained, a cluster must take publishes again, as RabbitMQ's does:
// in each round every node publishes one message with a confirm to every
// queue, and the messages are taken back with basic.get. A publish that
// is not acked within afterwardsConfirm counts as refused, a defect. The
// messages enter the history, so the lost and unexpected checks cover
// them as well. (It found a queue that, once it had hibernated, refused
// every publish forwarded by a node that had published to it before.)
func (w *workload) afterwards(ctx context.Context, c *cluster) (refused int, notes []string) {
	queues := slices.Concat(w.queues, w.sleepy)
	for round := range afterwardsRounds {
		if round > 0 {
			sleep(ctx, afterwardsPause)
		}
		for _, nd := range c.nodes {
			n, why := w.publishEach(ctx, nd, queues)
			refused += n
			notes = append(notes, why...)
		}
		if err := w.takeBack(ctx, c.nodes[round%len(c.nodes)], queues); err != nil {
			notes = append(notes, fmt.Sprintf("round %d: take the messages back: %v", round, err))
		}
	}
	return refused, notes
}

// publishEach publishes one message through nd to each queue, waiting for
// each confirm before the next publish; it returns how many were not
// acked, and why.
func (w *workload) publishEach(ctx context.Context, nd *node, queues []string) (refused int, notes []string) {
	conn, ch, err := w.dialConfirm(nd)
	if err != nil {
		return len(queues), []string{fmt.Sprintf("%s: no confirm channel: %v", nd.name, err)}
	}
	defer conn.Close()
	for _, q := range queues {
		id := w.h.publish(q, nd.name)
		body := strconv.FormatUint(id, 10)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, MessageId: body, Body: []byte(body),
		})
		if err != nil {
			return refused + len(queues) - slices.Index(queues, q), append(notes, fmt.Sprintf("%s: publish to %s: %v", nd.name, q, err))
		}
		wctx, cancel := context.WithTimeout(ctx, afterwardsConfirm)
		ok, err := dc.WaitContext(wctx)
		cancel()
		switch {
		case err != nil:
			refused++
			notes = append(notes, fmt.Sprintf("%s: publish to %s: no confirm within %s", nd.name, q, afterwardsConfirm))
		case !ok:
			refused++
			notes = append(notes, fmt.Sprintf("%s: publish to %s: nacked", nd.name, q))
		default:
			w.h.confirm(id)
		}
	}
	return refused, notes
}

// takeBack empties queues through nd with basic.get (getAll).
func (w *workload) takeBack(ctx context.Context, nd *node, queues []string) error {
	conn, ch, err := w.dial(nd)
	if err != nil {
		return err
	}
	defer conn.Close()
	return w.getAll(ctx, ch, nd, queues)
}
