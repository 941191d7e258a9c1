package node_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// withDisconnectedTimeout is a quorum queue's arguments with its consumer
// disconnected timeout.
func withDisconnectedTimeout(d time.Duration) amqp091.Table {
	return amqp091.Table{"x-queue-type": "quorum", "x-consumer-disconnected-timeout": int64(d / time.Millisecond)}
}

// holdFive has a consumer on m take five messages of queue and hold them.
func holdFive(t *testing.T, m, publisher *nodetest.Member, queue string) {
	t.Helper()
	holdFiveOn(t, m, publisher, queue)
}

// holdFiveOn is holdFive, and returns the holder's channel.
func holdFiveOn(t *testing.T, m, publisher *nodetest.Member, queue string) *amqp091.Channel {
	t.Helper()
	ch := m.Channel()
	if err := ch.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "holder", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publishConfirmedN(t, publisher.Channel(), queue, 0, 5)
	for range 5 {
		select {
		case <-ds:
		case <-time.After(10 * time.Second):
			t.Fatal("the holder got fewer than five")
		}
	}
	return ch
}

// TestKilledConsumerNodeHoldsForTheDisconnectedTimeout: the messages a
// consumer held when its node died wait out the queue's consumer
// disconnected timeout (the node may only be cut off, and come back), as
// in RabbitMQ 4.3, and then go to another consumer, redelivered, their
// delivery-count unchanged.
func TestKilledConsumerNodeHoldsForTheDisconnectedTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 6 * time.Second
	_, _, leader, others := threeNodesWithQueue(t, "held", withDisconnectedTimeout(timeout))
	victim, other := others[0], others[1]
	holdFive(t, victim, leader, "held")
	later := consumeSlowly(t, other.Channel(), "held", 100)
	killed := time.Now() // Kill returns once the node has shut down
	victim.Kill()
	testwait.For(t, 30*time.Second, "the five back, to the other consumer", func() bool {
		return len(later.deliveries()) == 5
	})
	if waited := time.Since(killed); waited < timeout-time.Second {
		t.Fatalf("returned %v after the kill, within the %v timeout", waited, timeout)
	}
	for _, d := range later.deliveries() {
		if n, ok := d.Headers["x-delivery-count"]; !d.Redelivered || (ok && n != int64(0)) {
			t.Fatalf("%q: redelivered %v, x-delivery-count %v (the timeout counts no failed delivery)", d.Body, d.Redelivered, n)
		}
	}
}

// TestRestartedConsumerNodeReturnsAtOnce: a consumer's node that comes
// back restarted has lost its channels, whatever the timeout: what its
// consumer held returns at once (RabbitMQ's nodeup, then down).
func TestRestartedConsumerNodeReturnsAtOnce(t *testing.T) {
	t.Parallel()
	_, _, leader, others := threeNodesWithQueue(t, "restarted", withDisconnectedTimeout(10*time.Minute))
	victim, other := others[0], others[1]
	holdFive(t, victim, leader, "restarted")
	later := consumeSlowly(t, other.Channel(), "restarted", 100)
	victim.Kill()
	victim.Start()
	testwait.For(t, 30*time.Second, "the restarted node's five delivered again", func() bool {
		return len(later.deliveries()) == 5
	})
}

// TestOrphanedConsumerOfAKilledLeaderNode: a consumer on the node of a
// queue's leader, which dies, is an orphan to the new leader; it keeps
// its messages for the disconnected timeout, not the two seconds a new
// leader gives its predecessor's consumers to follow, and they return
// once its node comes back restarted.
func TestOrphanedConsumerOfAKilledLeaderNode(t *testing.T) {
	t.Parallel()
	ms, _, leader, others := threeNodesWithQueue(t, "orphaned", withDisconnectedTimeout(10*time.Minute))
	if leader == ms[0] {
		// The first node joined nobody: restarted, it would wait for
		// the others' gossip to find it.
		if err := ms[0].TransferLeadership("/", "orphaned", ms[1].Name()); err != nil {
			t.Fatal(err)
		}
		leader = ms[1]
		others = []*nodetest.Member{ms[0], ms[2]}
		testwait.For(t, 20*time.Second, "the queue led by "+leader.Name(), func() bool { return leader.QueueLeads("/", "orphaned") })
	}
	holdFive(t, leader, others[0], "orphaned")
	later := consumeSlowly(t, others[1].Channel(), "orphaned", 100)
	leader.Kill()
	time.Sleep(8 * time.Second) // a new leader, and four times its OrphanGrace
	if n := len(later.deliveries()); n != 0 {
		t.Fatalf("%d of the dead node's held messages handed out within the timeout", n)
	}
	leader.Start()
	testwait.For(t, 30*time.Second, "the five back once the node restarted", func() bool {
		return len(later.deliveries()) == 5
	})
}

// TestOrphanedConsumerReturnsAfterTheDisconnectedTimeout: a consumer on
// the node of a queue's leader, which dies and stays down, is an orphan to
// the new leader; its messages go to another consumer once the
// disconnected timeout has passed, not before, their delivery-count
// unchanged (rabbit_fifo's return on that timeout counts no failed
// delivery).
func TestOrphanedConsumerReturnsAfterTheDisconnectedTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 6 * time.Second
	_, _, leader, others := threeNodesWithQueue(t, "expired", withDisconnectedTimeout(timeout))
	holdFive(t, leader, others[0], "expired")
	later := consumeSlowly(t, others[1].Channel(), "expired", 100)
	killed := time.Now() // Kill returns once the node has shut down
	leader.Kill()
	testwait.For(t, 40*time.Second, "the five back, to the other consumer", func() bool {
		return len(later.deliveries()) == 5
	})
	if waited := time.Since(killed); waited < timeout {
		t.Fatalf("returned %v after the kill, within the %v timeout", waited, timeout)
	}
	for _, d := range later.deliveries() {
		if n, ok := d.Headers["x-delivery-count"]; !d.Redelivered || (ok && n != int64(0)) {
			t.Fatalf("%q: redelivered %v, x-delivery-count %v", d.Body, d.Redelivered, n)
		}
	}
}
