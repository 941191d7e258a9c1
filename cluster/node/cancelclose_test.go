package node_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestCancelThenCloseStrandsNothing: a consumer attached through a node
// that does not lead its queue is cancelled and its connection closed at
// once, as amqp091's ConsumeWithContext does when its context ends, while
// the leader is delivering. Every message must be ready again once the
// consumers are gone.
//
// Each round returns a prefetch window with its channel's close, which
// counts as a failed delivery (delivery-count +1), so at the default
// delivery limit of 20 the messages cycled most would be dropped after
// the twenty-first round, as RabbitMQ drops them: the queue has no limit
// here: at the default limit a dropped window would look like a
// stranded one.
func TestCancelThenCloseStrandsNothing(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ch := ms[0].Channel()
	args := amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": -1}
	if _, err := ch.QueueDeclare("cc", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	leader := leaderName(t, ms, "cc")
	via := notNamed(ms, leader)
	const n = 400
	publishSome(t, byName(ms, leader), "cc", n)
	for range 30 {
		conn := via.Dial()
		c, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Qos(32, 0, false); err != nil {
			t.Fatal(err)
		}
		ds, err := c.Consume("cc", "k", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-ds // deliveries are flowing
		c.Cancel("k", true)
		conn.Close()
	}
	testwait.For(t, 15*time.Second, "every message ready again", func() bool {
		q, err := ch.QueueDeclarePassive("cc", true, false, false, false, args)
		// declare-ok counts the messages ready, as RabbitMQ's does.
		return err == nil && q.Messages == n && q.Consumers == 0
	})
}
