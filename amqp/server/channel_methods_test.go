package server_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/raftq/testwait"
)

func declareTemp(t *testing.T, ch *amqp091.Channel, args amqp091.Table) string {
	t.Helper()
	q, err := ch.QueueDeclare("", false, true, true, false, args)
	if err != nil {
		t.Fatalf("declare: %v", err)
	}
	return q.Name
}

func pub(t *testing.T, ch *amqp091.Channel, key, body string) {
	t.Helper()
	if err := ch.Publish("", key, false, false, amqp091.Publishing{Body: []byte(body)}); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

func readyCount(t *testing.T, ch *amqp091.Channel, name string) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(name, false, true, true, false, nil)
	if err != nil {
		t.Fatalf("passive declare: %v", err)
	}
	return q.Messages
}

func TestTxCommitRollbackPublish(t *testing.T) {
	tn := startNode(t)
	c := tn.dial(t)
	ch := openChannel(t, c)
	obs := openChannel(t, c)
	q := declareTemp(t, ch, nil)
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	pub(t, ch, q, "a")
	pub(t, ch, q, "b")
	time.Sleep(50 * time.Millisecond) // time for an uncommitted publish to arrive, were it not held: nothing to wait on
	if n := readyCount(t, obs, q); n != 0 {
		t.Fatalf("before commit: %d ready, want 0", n)
	}
	if err := ch.TxRollback(); err != nil {
		t.Fatal(err)
	}
	if n := readyCount(t, obs, q); n != 0 {
		t.Fatalf("after rollback: %d ready, want 0", n)
	}
	pub(t, ch, q, "c")
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	if n := readyCount(t, obs, q); n != 1 {
		t.Fatalf("after commit: %d ready, want 1", n)
	}
	m, ok, err := obs.Get(q, true)
	if err != nil || !ok || string(m.Body) != "c" {
		t.Fatalf("get: %q %v %v", m.Body, ok, err)
	}
}

func TestTxAcks(t *testing.T) {
	tn := startNode(t)
	c := tn.dial(t)
	ch := openChannel(t, c)
	obs := openChannel(t, c)
	q := declareTemp(t, ch, nil)
	pub(t, obs, q, "x")
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	m, ok, err := ch.Get(q, false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := ch.Ack(m.DeliveryTag, false); err != nil {
		t.Fatal(err)
	}
	// Rolled back: the delivery is unacknowledged again, so acking it
	// again is valid; committing that settles it.
	if err := ch.TxRollback(); err != nil {
		t.Fatal(err)
	}
	if err := ch.Ack(m.DeliveryTag, false); err != nil {
		t.Fatal(err)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	// Closing the channel would requeue an unsettled delivery.
	ch.Close()
	time.Sleep(50 * time.Millisecond) // time for a wrongly unsettled delivery to be requeued: nothing to wait on
	if n := readyCount(t, obs, q); n != 0 {
		t.Fatalf("after commit and close: %d ready, want 0 (ack not carried out)", n)
	}

	// An ack left in an uncommitted transaction is undone on close.
	ch2 := openChannel(t, c)
	pub(t, obs, q, "y")
	ch2.Tx()
	m, ok, err = ch2.Get(q, false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	ch2.Ack(m.DeliveryTag, false)
	ch2.Close()
	testwait.For(t, 2*time.Second, "uncommitted ack requeued on close", func() bool { return readyCount(t, obs, q) == 1 })
}

func TestTxErrors(t *testing.T) {
	tn := startNode(t)
	c := tn.dial(t)
	ch := openChannel(t, c)
	wantError(t, ch.TxCommit(), 406, "PRECONDITION_FAILED - channel is not transactional")
	ch = openChannel(t, c)
	wantError(t, ch.TxRollback(), 406, "PRECONDITION_FAILED - channel is not transactional")
	ch = openChannel(t, c)
	ch.Tx()
	wantError(t, ch.Confirm(false), 406, "PRECONDITION_FAILED - cannot switch from tx to confirm mode")
	ch = openChannel(t, c)
	ch.Confirm(false)
	wantError(t, ch.Tx(), 406, "PRECONDITION_FAILED - cannot switch from confirm to tx mode")
}

func TestTxBufferBound(t *testing.T) {
	tn := startNode(t, withServer(func(c *server.Config) { c.MaxMessageSize = 1 << 20 }))
	c := tn.dial(t)
	ch := openChannel(t, c)
	closed := notifyClose(ch)
	q := declareTemp(t, ch, nil)
	ch.Tx()
	body := make([]byte, 1<<20)
	for i := 0; i < 70; i++ { // 70 MiB > 64 MiB
		if err := ch.Publish("", q, false, false, amqp091.Publishing{Body: body}); err != nil {
			break
		}
	}
	select {
	case e := <-closed:
		if e == nil || e.Code != 406 || !strings.Contains(e.Reason, "transaction too large") {
			t.Fatalf("close: %v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed for an oversized transaction")
	}
}

// permitGlobalQos starts a node with --global-qos permit (RabbitMQ before
// 4.3).
func permitGlobalQos(cfg *node.Config) { cfg.Server.PermitGlobalQos = true }

// TestGlobalQos: with global_qos permitted, one prefetch limit is shared by
// the channel's consumers (classic queues).
func TestGlobalQos(t *testing.T) {
	tn := startNode(t, permitGlobalQos)
	c := tn.dial(t)
	ch := openChannel(t, c)
	q1 := declareTemp(t, ch, nil)
	q2 := declareTemp(t, ch, nil)
	for i := 0; i < 5; i++ {
		pub(t, ch, q1, "1")
		pub(t, ch, q2, "2")
	}
	if err := ch.Qos(3, 0, true); err != nil {
		t.Fatal(err)
	}
	d1, _ := ch.Consume(q1, "", false, false, false, false, nil)
	d2, _ := ch.Consume(q2, "", false, false, false, false, nil)
	var got []amqp091.Delivery
	timeout := time.After(300 * time.Millisecond)
loop:
	for {
		select {
		case m := <-d1:
			got = append(got, m)
		case m := <-d2:
			got = append(got, m)
		case <-timeout:
			break loop
		}
	}
	if len(got) != 3 {
		t.Fatalf("got %d deliveries with a global prefetch of 3", len(got))
	}
	got[0].Ack(false)
	select {
	case <-d1:
	case <-d2:
	case <-time.After(2 * time.Second):
		t.Fatal("no delivery after an ack freed the global prefetch")
	}
	select {
	case m := <-d1:
		t.Fatalf("over the limit: %q", m.Body)
	case m := <-d2:
		t.Fatalf("over the limit: %q", m.Body)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestGlobalQosQuorum: with global_qos permitted, a quorum queue refuses a
// consumer under a global limit, as RabbitMQ before 4.3.
func TestGlobalQosQuorum(t *testing.T) {
	tn := startNode(t, permitGlobalQos)
	c := tn.dial(t)
	ch := openChannel(t, c)
	if _, err := ch.QueueDeclare("qq-global", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	ch.Qos(10, 0, true)
	_, err := ch.Consume("qq-global", "", false, false, false, false, nil)
	wantError(t, err, 540, "NOT_IMPLEMENTED - queue 'qq-global' in vhost '/' does not support global qos")
}

// TestGlobalQosDenied: by default, as RabbitMQ 4.3 (its deprecated feature
// global_qos denied), basic.qos with global set is taken as without it: an
// application that sets it consumes from quorum queues, each consumer with
// its own prefetch.
func TestGlobalQosDenied(t *testing.T) {
	tn := startNode(t)
	c := tn.dial(t)
	ch := openChannel(t, c)
	var ds []<-chan amqp091.Delivery
	for _, q := range []string{"gq-1", "gq-2"} {
		declareQuorum(t, ch, q, nil)
		for i := 0; i < 5; i++ {
			pub(t, ch, q, q)
		}
	}
	if err := ch.Qos(3, 0, true); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"gq-1", "gq-2"} {
		d, err := ch.Consume(q, "", false, false, false, false, nil)
		if err != nil {
			t.Fatalf("consume %s under a global qos: %v", q, err)
		}
		ds = append(ds, d)
	}
	for i, d := range ds {
		var got []amqp091.Delivery
		for len(got) < 3 {
			got = append(got, receive(t, d))
		}
		select {
		case m := <-d:
			t.Fatalf("consumer %d: a fourth delivery %q past its prefetch of 3", i, m.Body)
		case <-time.After(200 * time.Millisecond):
		}
		got[0].Ack(false)
		receive(t, d)
	}
}

func TestChannelFlow(t *testing.T) {
	tn := startNode(t)
	c := tn.dial(t)
	ch := openChannel(t, c)
	q := declareTemp(t, ch, nil)
	d, err := ch.Consume(q, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Flow(false); err != nil {
		t.Fatal(err)
	}
	pub(t, ch, q, "held1")
	pub(t, ch, q, "held2")
	noDelivery(t, d)
	if err := ch.Flow(true); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, d); string(m.Body) != "held1" {
		t.Fatalf("got %q", m.Body)
	}
	if m := receive(t, d); string(m.Body) != "held2" {
		t.Fatalf("got %q", m.Body)
	}
	pub(t, ch, q, "after")
	if m := receive(t, d); string(m.Body) != "after" {
		t.Fatalf("got %q", m.Body)
	}
}

func TestDirectReplyTo(t *testing.T) {
	tn := startNode(t)
	c := tn.dial(t)
	req := openChannel(t, c)
	srv := openChannel(t, c)
	rq := declareTemp(t, srv, nil)
	requests, _ := srv.Consume(rq, "", true, false, false, false, nil)

	if _, err := req.QueueDeclarePassive("amq.rabbitmq.reply-to", false, false, false, false, nil); err != nil {
		t.Fatalf("passive declare of the pseudo-queue: %v", err)
	}
	replies, err := req.Consume("amq.rabbitmq.reply-to", "rc", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := req.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := req.NotifyPublish(make(chan amqp091.Confirmation, 4))
	if err := req.Publish("", rq, false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to", Body: []byte("ping")}); err != nil {
		t.Fatal(err)
	}
	r := receive(t, requests)
	if !strings.HasPrefix(r.ReplyTo, "amq.rabbitmq.reply-to.") {
		t.Fatalf("reply_to not rewritten: %q", r.ReplyTo)
	}
	if c := <-confirms; !c.Ack {
		t.Fatal("request nacked")
	}
	check := openChannel(t, c)
	if q, err := check.QueueDeclarePassive(r.ReplyTo, false, false, false, false, nil); err != nil || q.Consumers != 1 {
		t.Fatalf("passive declare of the reply name: %+v %v", q, err)
	}
	// A plain declare is a probe too (RabbitMQ 4.3).
	if _, err := check.QueueDeclare(r.ReplyTo, false, false, false, false, nil); err != nil {
		t.Fatalf("declare of the reply name: %v", err)
	}
	if err := srv.Publish("", r.ReplyTo, false, false, amqp091.Publishing{Body: []byte("pong")}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, replies); string(m.Body) != "pong" || m.RoutingKey != r.ReplyTo || m.ConsumerTag != "rc" {
		t.Fatalf("reply %q key %q tag %q", m.Body, m.RoutingKey, m.ConsumerTag)
	}
	// The reply name in CC routes too.
	srv.Publish("", "nowhere", false, false, amqp091.Publishing{Headers: amqp091.Table{"CC": []any{r.ReplyTo}}, Body: []byte("cc")})
	if m := receive(t, replies); string(m.Body) != "cc" {
		t.Fatalf("reply %q", m.Body)
	}
	// A reply to oneself is delivered and confirmed.
	req.Publish("", r.ReplyTo, false, false, amqp091.Publishing{Body: []byte("self")})
	if m := receive(t, replies); string(m.Body) != "self" {
		t.Fatalf("reply %q", m.Body)
	}
	if c := <-confirms; !c.Ack {
		t.Fatal("self reply nacked")
	}
	// A transactional responder's reply waits for commit.
	txc := openChannel(t, c)
	txc.Tx()
	txc.Publish("", r.ReplyTo, false, false, amqp091.Publishing{Body: []byte("tx")})
	noDelivery(t, replies)
	txc.TxCommit()
	if m := receive(t, replies); string(m.Body) != "tx" {
		t.Fatalf("reply %q", m.Body)
	}

	// The requester cancels: replies are no longer delivered. As in
	// RabbitMQ 4.2 and later, the reply name of a running node still
	// routes, so a mandatory reply is dropped, not returned; a name that
	// names no node of the cluster, or is malformed, is unroutable.
	if err := req.Cancel("rc", false); err != nil {
		t.Fatal(err)
	}
	late := openChannel(t, c)
	if err := late.Confirm(false); err != nil {
		t.Fatal(err)
	}
	lateConfirms := late.NotifyPublish(make(chan amqp091.Confirmation, 4))
	returns := late.NotifyReturn(make(chan amqp091.Return, 4))
	unknownNode := "amq.rabbitmq.reply-to." + base64.RawURLEncoding.EncodeToString([]byte("elsewhere")) + ".abc"
	for _, name := range []string{r.ReplyTo, unknownNode, "amq.rabbitmq.reply-to.garbage"} {
		if err := late.Publish("", name, true, false, amqp091.Publishing{Body: []byte("late")}); err != nil {
			t.Fatal(err)
		}
		if c := <-lateConfirms; !c.Ack {
			t.Fatalf("reply to %s nacked", name)
		}
		// A return comes before its publish's confirm.
		select {
		case ret := <-returns:
			if name == r.ReplyTo || ret.ReplyCode != 312 {
				t.Fatalf("reply to %s returned %d", name, ret.ReplyCode)
			}
		default:
			if name != r.ReplyTo {
				t.Fatalf("no basic.return for a reply to %s", name)
			}
		}
	}
	_, err = check.QueueDeclarePassive(r.ReplyTo, false, false, false, false, nil)
	wantError(t, err, 404, "NOT_FOUND - no queue '"+r.ReplyTo+"' in vhost '/'")
}

func TestDirectReplyToErrors(t *testing.T) {
	tn := startNode(t)
	c := tn.dial(t)
	ch := openChannel(t, c)
	_, err := ch.Consume("amq.rabbitmq.reply-to", "", false, false, false, false, nil)
	wantError(t, err, 406, "PRECONDITION_FAILED - reply consumer cannot acknowledge")

	ch = openChannel(t, c)
	if _, err := ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, err = ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	wantError(t, err, 406, "PRECONDITION_FAILED - reply consumer already set")

	// The request must be published on the reply consumer's channel.
	other := openChannel(t, c)
	if _, err := other.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ch = openChannel(t, c)
	closed := notifyClose(ch)
	ch.Publish("", "whatever", false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to"})
	select {
	case e := <-closed:
		if e == nil || e.Code != 406 || e.Reason != "PRECONDITION_FAILED - fast reply consumer does not exist" {
			t.Fatalf("close: %v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed")
	}
}

func TestRecoverRequeueFalse(t *testing.T) {
	tn := startNode(t)
	c := tn.dial(t)
	ch := openChannel(t, c)
	wantError(t, ch.Recover(false), 540, "NOT_IMPLEMENTED - requeue=false")
}

func TestTxRejectAndNack(t *testing.T) {
	tn := startNode(t)
	c := tn.dial(t)
	ch := openChannel(t, c)
	obs := openChannel(t, c)
	q := declareTemp(t, ch, nil)
	pub(t, obs, q, "a")
	pub(t, obs, q, "b")
	ch.Tx()
	a, _, _ := ch.Get(q, false)
	b, _, _ := ch.Get(q, false)
	if err := ch.Reject(a.DeliveryTag, false); err != nil {
		t.Fatal(err)
	}
	if err := ch.Nack(b.DeliveryTag, false, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // time for an uncommitted requeue to show, were it not held: nothing to wait on
	if n := readyCount(t, obs, q); n != 0 {
		t.Fatalf("before commit: %d ready, want 0", n)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	// a is discarded, b requeued.
	testwait.For(t, 2*time.Second, "nack requeue carried out at commit", func() bool { return readyCount(t, obs, q) == 1 })
	m, ok, err := obs.Get(q, true)
	if err != nil || !ok || string(m.Body) != "b" || !m.Redelivered {
		t.Fatalf("get: %q %v %v redelivered=%v", m.Body, ok, err, m.Redelivered)
	}
}
