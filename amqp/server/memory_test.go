package server_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/alarm"
	"github.com/warrenmq/warren/cluster/node"
)

// TestMemoryAlarmBlocksPublishers fills queues past the memory limit and
// checks that the publisher is blocked (connection.blocked, no further
// confirms) until a purge frees the memory, after which everything it
// sent is confirmed. The node counts message bytes alone, for exact
// numbers: the test process's memory is not the node's.
func TestMemoryAlarmBlocksPublishers(t *testing.T) {
	const limit = 256 << 10
	n := startNode(t, func(c *node.Config) {
		c.Broker.MemoryLimit = limit
		c.MessageBytesOnly = true
	})

	pubConn := n.dial(t)
	blocked := pubConn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	pub := openChannel(t, pubConn)
	if _, err := pub.QueueDeclare("fill", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 1000))

	body := make([]byte, 16<<10)
	const total = 40 // 640 KiB: well past the 256 KiB limit
	go func() {
		for i := 0; i < total; i++ {
			if err := pub.PublishWithContext(context.Background(), "", "fill", false, false, amqp091.Publishing{Body: body}); err != nil {
				return
			}
		}
	}()

	expectBlocking(t, blocked, true, "low on memory")
	// Once blocked, the confirms stop short of the total.
	got := 0
	drain := func(wait time.Duration) {
		for {
			select {
			case <-confirms:
				got++
			case <-time.After(wait):
				return
			}
		}
	}
	drain(200 * time.Millisecond)
	if got >= total || got < limit/len(body)-1 {
		t.Fatalf("%d of %d publishes confirmed while blocked; want about %d", got, total, limit/len(body))
	}
	if used := n.Broker().MemoryUsed(); used < limit || used > limit+int64(len(body)) {
		t.Fatalf("queues hold %d bytes, want just over the %d limit", used, limit)
	}

	// Another connection purges; the publisher resumes.
	admin := openChannel(t, n.dial(t))
	if _, err := admin.QueuePurge("fill", false); err != nil {
		t.Fatal(err)
	}
	expectBlocking(t, blocked, false, "")
	for got < total {
		select {
		case <-confirms:
			got++
		case <-blocked:
			// Blocked again while the rest arrives: purge again.
			if _, err := admin.QueuePurge("fill", false); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d publishes confirmed after unblocking", got, total)
		}
	}
}

// TestMemoryAlarmCountsTheNodesMemory checks that the watermark is held
// against the node's memory, as RabbitMQ's: a watermark below what the
// node uses blocks publishers with no message held at all, and raising
// it (warrenctl set memory-high-watermark) lets the held publish through.
func TestMemoryAlarmCountsTheNodesMemory(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.Broker.MemoryLimit = 1 << 40 })
	if used := n.Broker().MemoryUsed(); used < 1<<20 || n.Broker().MemoryHeld() != 0 {
		t.Fatalf("memory used %d, message bytes held %d: want the process's memory (MiBs), none held", used, n.Broker().MemoryHeld())
	}

	consumer := openChannel(t, n.dial(t))
	if _, err := consumer.QueueDeclare("mem", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	pubConn := n.dial(t)
	blocked := pubConn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	pub := openChannel(t, pubConn)
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	if err := n.SetWatermark(alarm.Memory, "1MB"); err != nil {
		t.Fatal(err)
	}
	if !n.Broker().MemoryAlarm() {
		t.Fatalf("no memory alarm at a watermark of 1 MB, using %d bytes", n.Broker().MemoryUsed())
	}
	dc, err := pub.PublishWithDeferredConfirm("", "mem", false, false, amqp091.Publishing{Body: []byte("held")})
	if err != nil {
		t.Fatal(err)
	}
	expectBlocking(t, blocked, true, "low on memory")
	select {
	case <-dc.Done():
		t.Fatal("a publish was confirmed during the memory alarm")
	case <-time.After(300 * time.Millisecond):
	}

	if err := n.SetWatermark(alarm.Memory, "0.4"); err != nil {
		t.Fatal(err)
	}
	expectHeldPublishThrough(t, blocked, dc, consumer, "mem")
}

// TestDiskAlarmBlocksPublishers starts a node whose disk free limit is
// above the free space of its data directory's file system: its first
// publish is held (connection.blocked, "low on disk") and nothing reaches
// the queue, while a consumer on another connection is served; lowering
// the limit, as warrenctl set disk-free-limit does, lets it through.
func TestDiskAlarmBlocksPublishers(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.DiskFreeLimit = 1 << 62 })
	if free := n.DiskMonitor().Free(); free <= 0 || free >= 1<<62 {
		t.Fatalf("free space %d", free)
	}

	consumer := openChannel(t, n.dial(t))
	if _, err := consumer.QueueDeclare("disk", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	pubConn := n.dial(t)
	blocked := pubConn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	pub := openChannel(t, pubConn)
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := pub.PublishWithDeferredConfirm("", "disk", false, false, amqp091.Publishing{Body: []byte("held")})
	if err != nil {
		t.Fatal(err)
	}
	expectBlocking(t, blocked, true, "low on disk")
	select {
	case <-dc.Done():
		t.Fatal("a publish was confirmed during the disk alarm")
	case <-time.After(300 * time.Millisecond):
	}
	if q, err := consumer.QueueDeclarePassive("disk", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil || q.Messages != 0 {
		t.Fatalf("during the alarm: queue %+v, %v (the consumer's connection must be served, the queue empty)", q, err)
	}

	if err := n.SetWatermark(alarm.Disk, "50MB"); err != nil {
		t.Fatal(err)
	}
	expectHeldPublishThrough(t, blocked, dc, consumer, "disk")
}

// expectHeldPublishThrough checks the end of an alarm: the publisher is
// unblocked, its held publish confirmed, and the message in queue.
func expectHeldPublishThrough(t *testing.T, blocked <-chan amqp091.Blocking, dc *amqp091.DeferredConfirmation, consumer *amqp091.Channel, queue string) {
	t.Helper()
	expectBlocking(t, blocked, false, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("held publish: ack %v, %v", ok, err)
	}
	if msg, ok, err := consumer.Get(queue, true); err != nil || !ok || string(msg.Body) != "held" {
		t.Fatalf("get after the alarm: %q %v %v", msg.Body, ok, err)
	}
}

// expectBlocking waits for the next connection.blocked (active, with
// reason) or connection.unblocked notification.
func expectBlocking(t *testing.T, notes <-chan amqp091.Blocking, active bool, reason string) {
	t.Helper()
	select {
	case b := <-notes:
		if b.Active != active || b.Reason != reason {
			t.Fatalf("notification %+v, want active %v, reason %q", b, active, reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no notification (want active %v) within 5s", active)
	}
}
