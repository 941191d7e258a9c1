package main

import (
	"context"
	"fmt"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The queues' write-ahead log fills its segment with zeros a megabyte
// ahead of its writes (raftq/wal's prefill), so a node whose disk has just
// run full goes on writing into that megabyte, which at the workload's
// rate lasts longer than a fault is held. The full-disk fault, with the
// alarm off, therefore presses the disk: it publishes a few megabytes to
// a scratch quorum queue with a member on every node, so that the full
// node must write beyond what it holds. The queue is outside the
// workload (no history, no consumer) and is deleted at the heal.

// pressQueue is the scratch queue, pressBytes how much is published to
// it, in messages of pressMessage bytes.
const (
	pressQueue   = "jepsen-disk-press"
	pressBytes   = 4 << 20
	pressMessage = 64 << 10
)

// pressDisk publishes pressBytes to pressQueue through node via, waiting
// up to limit for the confirms; it returns how many were confirmed.
func (n *nemesis) pressDisk(ctx context.Context, via int, limit time.Duration) (int, error) {
	conn, ch, err := n.w.dialConfirm(n.c.nodes[via])
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_, err = ch.QueueDeclare(pressQueue, true, false, false, false, amqp091.Table{
		"x-queue-type":                "quorum",
		"x-quorum-initial-group-size": int32(len(n.c.nodes)),
	})
	if err != nil {
		return 0, fmt.Errorf("declare %s: %w", pressQueue, err)
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var pending []*amqp091.DeferredConfirmation
	body := make([]byte, pressMessage)
	for range pressBytes / pressMessage {
		dc, err := ch.PublishWithDeferredConfirmWithContext(wctx, "", pressQueue, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: body})
		if err != nil {
			break
		}
		pending = append(pending, dc)
	}
	confirmed := 0
	for _, dc := range pending {
		if ok, err := dc.WaitContext(wctx); err == nil && ok {
			confirmed++
		}
	}
	return confirmed, nil
}

// unpress deletes the scratch queue through the first node that answers.
func (n *nemesis) unpress() error {
	var err error
	for _, nd := range n.c.nodes {
		var conn *amqp091.Connection
		var ch *amqp091.Channel
		if conn, ch, err = n.w.dial(nd); err != nil {
			continue
		}
		_, err = ch.QueueDelete(pressQueue, false, false, false)
		conn.Close()
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("delete %s: %w", pressQueue, err)
}
