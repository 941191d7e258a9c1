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

	a := newAlarmClients(t, n, "mem")
	if err := n.SetWatermark(alarm.Memory, "1MB"); err != nil {
		t.Fatal(err)
	}
	if !n.Broker().MemoryAlarm() {
		t.Fatalf("no memory alarm at a watermark of 1 MB, using %d bytes", n.Broker().MemoryUsed())
	}
	a.publishHeld("low on memory")

	if err := n.SetWatermark(alarm.Memory, "0.4"); err != nil {
		t.Fatal(err)
	}
	a.expectThrough()
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

	a := newAlarmClients(t, n, "disk")
	a.publishHeld("low on disk")
	if q, err := a.consumer.QueueDeclarePassive("disk", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil || q.Messages != 0 {
		t.Fatalf("during the alarm: queue %+v, %v (the consumer's connection must be served, the queue empty)", q, err)
	}

	if err := n.SetWatermark(alarm.Disk, "50MB"); err != nil {
		t.Fatal(err)
	}
	a.expectThrough()
}

// alarmClients are what the alarm tests drive, each on its own
// connection: a consumer's channel and a publisher's with confirms, and
// the quorum queue they share.
type alarmClients struct {
	t        *testing.T
	queue    string
	consumer *amqp091.Channel
	pub      *amqp091.Channel
	blocked  chan amqp091.Blocking
	held     *amqp091.DeferredConfirmation
}

func newAlarmClients(t *testing.T, n *testNode, queue string) *alarmClients {
	t.Helper()
	a := &alarmClients{t: t, queue: queue, consumer: openChannel(t, n.dial(t))}
	if _, err := a.consumer.QueueDeclare(queue, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	pubConn := n.dial(t)
	a.blocked = pubConn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	a.pub = openChannel(t, pubConn)
	if err := a.pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return a
}

// publishHeld publishes during an alarm: the publisher is told it is
// blocked for reason, and the publish is not confirmed.
func (a *alarmClients) publishHeld(reason string) {
	a.t.Helper()
	dc, err := a.pub.PublishWithDeferredConfirm("", a.queue, false, false, amqp091.Publishing{Body: []byte("held")})
	if err != nil {
		a.t.Fatal(err)
	}
	a.held = dc
	expectBlocking(a.t, a.blocked, true, reason)
	select {
	case <-dc.Done():
		a.t.Fatalf("a publish was confirmed during the alarm (%s)", reason)
	case <-time.After(300 * time.Millisecond):
	}
}

// expectThrough checks the end of an alarm: the publisher is unblocked,
// its held publish confirmed, and the message in the queue.
func (a *alarmClients) expectThrough() {
	a.t.Helper()
	expectBlocking(a.t, a.blocked, false, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ok, err := a.held.WaitContext(ctx); !ok || err != nil {
		a.t.Fatalf("held publish: ack %v, %v", ok, err)
	}
	if msg, ok, err := a.consumer.Get(a.queue, true); err != nil || !ok || string(msg.Body) != "held" {
		a.t.Fatalf("get after the alarm: %q %v %v", msg.Body, ok, err)
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
