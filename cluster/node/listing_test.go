package node_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// listedQueue is queue name in the admin listing as c's node answers it.
func listedQueue(t *testing.T, c adminpb.AdminClient, name string) *adminpb.Queue {
	t.Helper()
	list, err := c.ListQueues(callCtx(t, 10*time.Second), &adminpb.ListQueuesRequest{Vhost: "/"})
	if err != nil {
		t.Fatalf("list queues: %v", err)
	}
	for _, q := range list.Queues {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("queue %s not listed", name)
	return nil
}

// TestListingCountsDeadLetters: at-least-once dead letters that wait for
// a route to their target show in the queue listing of every node (the
// DLX column, RabbitMQ's messages_dlx), apart from ready and unacked; once
// the target exists they reach it and the count drops to zero.
func TestListingCountsDeadLetters(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	args := amqp091.Table{
		"x-queue-type":           "quorum",
		"x-dead-letter-exchange": "held.dlx", // not declared yet
		"x-dead-letter-strategy": "at-least-once",
		"x-overflow":             "reject-publish",
	}
	if _, err := ch.QueueDeclare("held", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	pub := ms[0].Channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"a", "b"} {
		publishConfirmed(t, pub, "held", body)
	}
	for range 2 {
		d, ok, err := ch.Get("held", false)
		if err != nil || !ok {
			t.Fatalf("get: %v %v", ok, err)
		}
		if err := d.Reject(false); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms {
		c := adminClient(t, m)
		testwait.For(t, 10*time.Second, "two dead letters listed by "+m.Name(), func() bool {
			q := listedQueue(t, c, "held")
			return q.DeadLettered == 2 && q.Ready == 0 && q.Unacked == 0 && q.Messages == 0
		})
	}

	if err := ch.ExchangeDeclare("held.dlx", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("held.target", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("held.target", "", "held.dlx", false, nil); err != nil {
		t.Fatal(err)
	}
	c := adminClient(t, ms[2])
	testwait.For(t, 15*time.Second, "the dead letters delivered and settled", func() bool {
		return listedQueue(t, c, "held").DeadLettered == 0 && listedQueue(t, c, "held.target").Ready == 2
	})
}

// TestListingCountsDelayedRetries: a quorum queue's returned messages
// waiting out a delayed retry show in the queue listing of every node
// (the DELAYED column, RabbitMQ 4.3's messages_delayed), apart from ready
// and unacked, until their delay is over.
func TestListingCountsDelayedRetries(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	args := amqp091.Table{"x-queue-type": "quorum", "x-delayed-retry-type": "all", "x-delayed-retry-min": int32(4000)}
	if _, err := ch.QueueDeclare("later", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	pub := ms[0].Channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, pub, "later", "a")
	d, ok, err := ch.Get("later", false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		c := adminClient(t, m)
		testwait.For(t, 3*time.Second, "a delayed message listed by "+m.Name(), func() bool {
			q := listedQueue(t, c, "later")
			return q.Delayed == 1 && q.Ready == 0 && q.Unacked == 0 && q.Messages == 0
		})
	}
	c := adminClient(t, ms[1])
	testwait.For(t, 10*time.Second, "the message ready after its delay", func() bool {
		q := listedQueue(t, c, "later")
		return q.Delayed == 0 && q.Ready == 1
	})
}
