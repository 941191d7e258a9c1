package server_test

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/raftq/testwait"
)

// consumeWithServerTag opens a connection frame by frame (amqp091-go
// always picks consumer tags itself) and returns the consumer tag the
// server chose for a basic.consume with an empty one.
func consumeWithServerTag(t *testing.T, n *testNode, queue string) string {
	t.Helper()
	nc, err := net.Dial("tcp", n.AMQPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	r, w := wire.NewReader(nc), wire.NewWriter(nc)
	send := func(ch uint16, m wire.Method) {
		t.Helper()
		if err := w.WriteMethod(ch, m); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(ch uint16, want string) wire.Method {
		t.Helper()
		for {
			f, err := r.ReadFrame()
			if err != nil {
				t.Fatalf("waiting for %s: %v", want, err)
			}
			if f.Type != wire.FrameMethod {
				continue
			}
			m, err := wire.DecodeMethod(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if f.Channel != ch || m.Name() != want {
				t.Fatalf("got %s on channel %d, want %s on %d", m.Name(), f.Channel, want, ch)
			}
			return m
		}
	}
	if _, err := nc.Write([]byte(wire.ProtocolHeader)); err != nil {
		t.Fatal(err)
	}
	expect(0, "connection.start")
	send(0, &wire.ConnectionStartOk{ClientProperties: wire.Table{"product": "test"}, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	tune := expect(0, "connection.tune").(*wire.ConnectionTune)
	send(0, &wire.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	expect(0, "connection.open-ok")
	send(1, &wire.ChannelOpen{})
	expect(1, "channel.open-ok")
	send(1, &wire.BasicConsume{Queue: queue})
	tag := expect(1, "basic.consume-ok").(*wire.BasicConsumeOk).ConsumerTag
	send(0, &wire.ConnectionClose{ReplyCode: 200, ReplyText: "bye"})
	expect(0, "connection.close-ok")
	return tag
}

func TestConsumerTags(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "tags")

	tag := consumeWithServerTag(t, n, "tags")
	if rest, ok := strings.CutPrefix(tag, "amq.ctag-"); !ok || len(rest) < 16 {
		t.Fatalf("server-generated consumer tag %q, want amq.ctag- and a random suffix", tag)
	}
	if other := consumeWithServerTag(t, n, "tags"); other == tag {
		t.Fatalf("two server-generated consumer tags are both %q", tag)
	}

	// A client-chosen tag is used as it is.
	publishBody(t, ch, "", "tags", "m")
	d, err := ch.Consume("tags", "my-tag", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := receive(t, d); m.ConsumerTag != "my-tag" {
		t.Fatalf("delivery for consumer %q, want my-tag", m.ConsumerTag)
	}
	// The same tag on another channel is fine.
	if _, err := openChannel(t, c).Consume("tags", "my-tag", true, false, false, false, nil); err != nil {
		t.Fatalf("same tag on another channel: %v", err)
	}

	// Reusing it on the same channel is a connection error.
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	_, err = ch.Consume("tags", "my-tag", true, false, false, false, nil)
	const text = "NOT_ALLOWED - attempt to reuse consumer tag 'my-tag'"
	wantError(t, err, amqp091.NotAllowed, text)
	waitClose(t, closed, amqp091.NotAllowed, text)
}

func TestExclusiveConsumer(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "solo")
	const text = "ACCESS_REFUSED - queue 'solo' in vhost '/' in exclusive use"

	if _, err := ch.Consume("solo", "only", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Nobody else may consume, exclusively or not, from any connection.
	_, err := openChannel(t, c).Consume("solo", "second", false, false, false, false, nil)
	wantError(t, err, amqp091.AccessRefused, text)
	_, err = openChannel(t, n.dial(t)).Consume("solo", "third", false, true, false, false, nil)
	wantError(t, err, amqp091.AccessRefused, text)

	// Once it is cancelled, others may.
	if err := ch.Cancel("only", false); err != nil {
		t.Fatal(err)
	}
	other := openChannel(t, c)
	if _, err := other.Consume("solo", "plain", false, false, false, false, nil); err != nil {
		t.Fatalf("consume after the exclusive consumer left: %v", err)
	}
	// An exclusive consumer cannot join a queue that has consumers.
	_, err = openChannel(t, c).Consume("solo", "greedy", false, true, false, false, nil)
	wantError(t, err, amqp091.AccessRefused, text)
}

func TestNoAckConsumer(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "noack")
	for _, b := range []string{"a", "b", "c"} {
		publishBody(t, ch, "", "noack", b)
	}
	cch := openChannel(t, c)
	// Prefetch does not hold back no-ack consumers.
	if err := cch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	d, err := cch.Consume("noack", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b", "c"} {
		if m := receive(t, d); string(m.Body) != want || m.Redelivered {
			t.Fatalf("got %q (redelivered %v), want %q", m.Body, m.Redelivered, want)
		}
	}
	// Settled on delivery: closing the channel returns nothing.
	if err := cch.Close(); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclarePassive("noack", false, false, false, false, nil)
	if err != nil || q.Messages != 0 {
		t.Fatalf("queue after no-ack consumer closed: %+v, %v; want empty", q, err)
	}
}

func TestCancelConsumer(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "cancel")
	d, err := ch.Consume("cancel", "c", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publishBody(t, ch, "", "cancel", "before")
	held := receive(t, d)
	if err := ch.Cancel("c", false); err != nil {
		t.Fatal(err)
	}
	// amqp091-go closes the delivery channel on cancel-ok.
	if m, ok := <-d; ok {
		t.Fatalf("delivery %q after cancel", m.Body)
	}
	publishBody(t, ch, "", "cancel", "after")
	if got := drainQueue(t, ch, "cancel"); len(got) != 1 || got[0] != "after" {
		t.Fatalf("queue holds %q after cancel, want only \"after\"", got)
	}
	// A delivery made before the cancel can still be acked...
	if err := held.Ack(false); err != nil {
		t.Fatal(err)
	}
	// ...and really was: closing the channel returns nothing, and the
	// channel did not fail over the ack.
	if err := ch.Close(); err != nil {
		t.Fatalf("close after acking a cancelled consumer's delivery: %v", err)
	}
	q, err := openChannel(t, c).QueueDeclarePassive("cancel", false, false, false, false, nil)
	if err != nil || q.Messages != 0 {
		t.Fatalf("queue = %+v, %v; want empty", q, err)
	}
	// Cancelling an unknown tag is fine.
	if err := openChannel(t, c).Cancel("nobody", false); err != nil {
		t.Fatal(err)
	}
}

func TestBasicGet(t *testing.T) {
	n := startNode(t)
	ch := openChannel(t, n.dial(t))
	declareQueue(t, ch, "get")
	if _, ok, err := ch.Get("get", false); err != nil || ok {
		t.Fatalf("get from empty queue: ok=%v err=%v", ok, err)
	}
	for _, b := range []string{"a", "b", "c"} {
		publish(t, ch, "", "get", amqp091.Publishing{Body: []byte(b), MessageId: "id-" + b})
	}
	for i, want := range []string{"a", "b", "c"} {
		m, ok, err := ch.Get("get", false)
		if err != nil || !ok {
			t.Fatalf("get %d: ok=%v err=%v", i, ok, err)
		}
		if string(m.Body) != want || m.MessageId != "id-"+want || m.MessageCount != uint32(2-i) ||
			m.Exchange != "" || m.RoutingKey != "get" || m.Redelivered {
			t.Fatalf("get %d = %q id %q count %d exchange %q key %q redelivered %v", i, m.Body, m.MessageId, m.MessageCount, m.Exchange, m.RoutingKey, m.Redelivered)
		}
		if m.DeliveryTag != uint64(i+1) {
			t.Fatalf("get %d has delivery tag %d", i, m.DeliveryTag)
		}
	}
	if _, ok, err := ch.Get("get", false); err != nil || ok {
		t.Fatalf("get after draining: ok=%v err=%v", ok, err)
	}
	// Unacked gets go back, redelivered, when the channel recovers.
	if err := ch.Recover(true); err != nil {
		t.Fatal(err)
	}
	m, ok, err := ch.Get("get", true)
	if err != nil || !ok || string(m.Body) != "a" || !m.Redelivered || m.MessageCount != 2 {
		t.Fatalf("get after recover = %q redelivered %v count %d ok=%v err=%v", m.Body, m.Redelivered, m.MessageCount, ok, err)
	}
	_, _, err = openChannel(t, n.dial(t)).Get("nope", false)
	wantError(t, err, amqp091.NotFound, "NOT_FOUND - no queue 'nope' in vhost '/'")
}

// collect receives n deliveries.
func collect(t *testing.T, d <-chan amqp091.Delivery, n int) []amqp091.Delivery {
	t.Helper()
	out := make([]amqp091.Delivery, n)
	for i := range out {
		out[i] = receive(t, d)
	}
	return out
}

func bodies(ds []amqp091.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Body)
	}
	return out
}

func TestAckNackReject(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "settle")
	for _, b := range []string{"1", "2", "3", "4", "5", "6"} {
		publishBody(t, ch, "", "settle", b)
	}
	cch := openChannel(t, c)
	d, err := cch.Consume("settle", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds := collect(t, d, 6)
	if got := strings.Join(bodies(ds), ""); got != "123456" {
		t.Fatalf("deliveries %q", got)
	}
	for i, m := range ds {
		if m.DeliveryTag != uint64(i+1) || m.Redelivered {
			t.Fatalf("delivery %d: tag %d redelivered %v", i, m.DeliveryTag, m.Redelivered)
		}
	}

	// ack multiple up to 2 settles 1 and 2.
	if err := cch.Ack(2, true); err != nil {
		t.Fatal(err)
	}
	// nack multiple with requeue up to 4 returns 3 and 4, redelivered.
	if err := cch.Nack(4, true, true); err != nil {
		t.Fatal(err)
	}
	re := collect(t, d, 2)
	if got := strings.Join(bodies(re), ""); got != "34" || !re[0].Redelivered || !re[1].Redelivered {
		t.Fatalf("after nack multiple got %q redelivered %v %v, want \"34\" redelivered", got, re[0].Redelivered, re[1].Redelivered)
	}
	if re[0].DeliveryTag != 7 || re[1].DeliveryTag != 8 {
		t.Fatalf("redeliveries have tags %d, %d; want 7, 8", re[0].DeliveryTag, re[1].DeliveryTag)
	}
	// reject with requeue returns 5, redelivered.
	if err := cch.Reject(5, true); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, d); string(m.Body) != "5" || !m.Redelivered || m.DeliveryTag != 9 {
		t.Fatalf("after reject got %q redelivered %v tag %d", m.Body, m.Redelivered, m.DeliveryTag)
	}
	// nack without requeue (6), reject without requeue (redelivered 3)
	// drop them.
	if err := cch.Nack(6, false, false); err != nil {
		t.Fatal(err)
	}
	if err := cch.Reject(7, false); err != nil {
		t.Fatal(err)
	}
	noDelivery(t, d)
	// Ack the rest (8 = "4", 9 = "5") with one multiple ack.
	if err := cch.Ack(9, true); err != nil {
		t.Fatal(err)
	}
	if err := cch.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	q, err := ch.QueueDeclarePassive("settle", false, false, false, false, nil)
	if err != nil || q.Messages != 0 {
		t.Fatalf("queue = %+v, %v; want empty (everything settled)", q, err)
	}
}

func TestUnknownDeliveryTag(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	setup := openChannel(t, c)
	declareQueue(t, setup, "tags406")

	t.Run("never delivered", func(t *testing.T) {
		ch := openChannel(t, c)
		closed := notifyClose(ch)
		if err := ch.Ack(42, false); err != nil {
			t.Fatal(err)
		}
		waitClose(t, closed, amqp091.PreconditionFailed, "PRECONDITION_FAILED - unknown delivery tag 42")
	})
	t.Run("double ack", func(t *testing.T) {
		ch := openChannel(t, c)
		publishBody(t, ch, "", "tags406", "x")
		m, ok, err := ch.Get("tags406", false)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		closed := notifyClose(ch)
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
		waitClose(t, closed, amqp091.PreconditionFailed, "PRECONDITION_FAILED - unknown delivery tag 1")
	})
	t.Run("multiple to a settled tag", func(t *testing.T) {
		// RabbitMQ looks for the tag itself even with multiple: acking
		// "up to 2" when 2 is already settled is an unknown tag, and
		// settles nothing.
		ch := openChannel(t, c)
		publishBody(t, ch, "", "tags406", "a")
		publishBody(t, ch, "", "tags406", "b")
		for range 2 {
			if _, ok, err := ch.Get("tags406", false); err != nil || !ok {
				t.Fatal(ok, err)
			}
		}
		if err := ch.Ack(2, false); err != nil {
			t.Fatal(err)
		}
		closed := notifyClose(ch)
		if err := ch.Ack(2, true); err != nil {
			t.Fatal(err)
		}
		waitClose(t, closed, amqp091.PreconditionFailed, "PRECONDITION_FAILED - unknown delivery tag 2")
		// Tag 1 was not acked: the channel's close requeued it.
		testwait.For(t, 5*time.Second, "tag 1 requeued", func() bool {
			q, err := openChannel(t, c).QueueDeclarePassive("tags406", false, false, false, false, nil)
			return err == nil && q.Messages == 1
		})
		drainQueue(t, setup, "tags406")
	})
	t.Run("no-ack get", func(t *testing.T) {
		// A no-ack delivery is settled already: its tag is unknown.
		ch := openChannel(t, c)
		publishBody(t, ch, "", "tags406", "x")
		if _, ok, err := ch.Get("tags406", true); err != nil || !ok {
			t.Fatal(ok, err)
		}
		closed := notifyClose(ch)
		if err := ch.Ack(1, false); err != nil {
			t.Fatal(err)
		}
		waitClose(t, closed, amqp091.PreconditionFailed, "PRECONDITION_FAILED - unknown delivery tag 1")
	})
	t.Run("reject and nack", func(t *testing.T) {
		ch := openChannel(t, c)
		closed := notifyClose(ch)
		if err := ch.Reject(3, true); err != nil {
			t.Fatal(err)
		}
		waitClose(t, closed, amqp091.PreconditionFailed, "PRECONDITION_FAILED - unknown delivery tag 3")
		ch = openChannel(t, c)
		closed = notifyClose(ch)
		if err := ch.Nack(4, true, true); err != nil {
			t.Fatal(err)
		}
		waitClose(t, closed, amqp091.PreconditionFailed, "PRECONDITION_FAILED - unknown delivery tag 4")
	})
	// Acking everything (tag 0, multiple) with nothing outstanding is fine.
	if err := setup.Ack(0, true); err != nil {
		t.Fatal(err)
	}
	declareQueue(t, setup, "still-open")
}

func TestPerConsumerPrefetch(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "prefetch")
	for i := range 5 {
		publishBody(t, ch, "", "prefetch", string(rune('a'+i)))
	}
	cch := openChannel(t, c)
	if err := cch.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	d, err := cch.Consume("prefetch", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := collect(t, d, 2)
	noDelivery(t, d)
	if err := first[0].Ack(false); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, d); string(m.Body) != "c" {
		t.Fatalf("after one ack got %q, want c", m.Body)
	}
	noDelivery(t, d)
	// Acking two at once lets two more through.
	if err := cch.Ack(3, true); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(bodies(collect(t, d, 2)), ""); got != "de" {
		t.Fatalf("after multiple ack got %q, want de", got)
	}
	// A second consumer on the channel has its own window (prefetch is
	// per consumer).
	publishBody(t, ch, "", "prefetch", "f")
	declareQueue(t, ch, "prefetch2")
	for range 3 {
		publishBody(t, ch, "", "prefetch2", "x")
	}
	d2, err := cch.Consume("prefetch2", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	collect(t, d2, 2)
	noDelivery(t, d2)
	noDelivery(t, d) // the first consumer's window is still full
}

func TestUnackedRequeuedOnChannelClose(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "requeue")
	for _, b := range []string{"a", "b", "c"} {
		publishBody(t, ch, "", "requeue", b)
	}
	cch := openChannel(t, c)
	d, err := cch.Consume("requeue", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds := collect(t, d, 3)
	if err := ds[1].Ack(false); err != nil {
		t.Fatal(err)
	}
	if err := cch.Close(); err != nil {
		t.Fatal(err)
	}
	// a and c come back, in order, marked redelivered.
	d2, err := ch.Consume("requeue", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "c"} {
		if m := receive(t, d2); string(m.Body) != want || !m.Redelivered {
			t.Fatalf("got %q redelivered %v, want %q redelivered", m.Body, m.Redelivered, want)
		}
	}
	noDelivery(t, d2)
}

func TestUnackedRequeuedOnConnectionClose(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "requeue.conn")
	publishBody(t, ch, "", "requeue.conn", "a")
	publishBody(t, ch, "", "requeue.conn", "b")

	consumerConn := n.dial(t)
	cch := openChannel(t, consumerConn)
	// A prefetch of 1 leaves b to the basic.get. Without it the consumer
	// could take b too, and a b the queue handed to the consumer after
	// its channel closed comes back as never delivered (not redelivered):
	// seen once in a full test run.
	if err := cch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	d, err := cch.Consume("requeue.conn", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	collect(t, d, 1)
	// b is fetched with basic.get, unacked too (the publishes were not
	// confirmed: b may still be on its way).
	getCh := openChannel(t, consumerConn)
	var b amqp091.Delivery
	testwait.For(t, 5*time.Second, "b ready for basic.get", func() bool {
		m, ok, err := getCh.Get("requeue.conn", false)
		if err != nil {
			t.Fatal(err)
		}
		b = m
		return ok
	})
	if string(b.Body) != "b" {
		t.Fatalf("basic.get: %q, want b", b.Body)
	}
	if err := consumerConn.Close(); err != nil {
		t.Fatal(err)
	}
	var got []amqp091.Delivery
	testwait.ForNil(t, 5*time.Second, "both messages requeued after the connection closed", func() error {
		m, ok, err := ch.Get("requeue.conn", true)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = append(got, m)
		}
		if len(got) != 2 {
			return fmt.Errorf("got %d", len(got))
		}
		return nil
	})
	// The two channels release in either order, and each one's
	// deliveries come back in the order returned.
	slices.SortFunc(got, func(x, y amqp091.Delivery) int { return strings.Compare(string(x.Body), string(y.Body)) })
	for i, want := range []string{"a", "b"} {
		if string(got[i].Body) != want || !got[i].Redelivered {
			t.Fatalf("requeued %q redelivered %v, want %q redelivered", got[i].Body, got[i].Redelivered, want)
		}
	}
}
