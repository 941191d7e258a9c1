package server_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/raftq/testwait"
)

// Classic queues run the quorum queue's machine in memory (raftq/classic):
// these check the features that brings them, through AMQP.

func declareClassic(t testing.TB, ch *amqp091.Channel, name string, args amqp091.Table) {
	t.Helper()
	if _, err := ch.QueueDeclare(name, false, false, false, false, args); err != nil {
		t.Fatalf("declare classic queue %q: %v", name, err)
	}
}

func TestClassicMessageTTLDeadLetters(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareClassic(t, ch, "c.ttl.dead", nil)
	dlx := amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "c.ttl.dead"}
	declareClassic(t, ch, "c.ttl.q", amqp091.Table{"x-message-ttl": int32(30), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "c.ttl.dead"})
	declareClassic(t, ch, "c.ttl.msg", dlx)
	pub := confirmChannel(t, c)
	mustPublishConfirmed(t, pub, "", "c.ttl.q", "queue-ttl")
	if !publishConfirmed(t, pub, "", "c.ttl.msg", amqp091.Publishing{Body: []byte("msg-ttl"), Expiration: "20"}) {
		t.Fatal("publish nacked")
	}
	got := map[string]bool{}
	for range 2 {
		d := getOne(t, ch, "c.ttl.dead", true)
		got[string(d.Body)] = true
		deaths := deathsOf(t, d)
		if deaths[0]["reason"] != "expired" {
			t.Fatalf("dead letter %q reason %v, want expired", d.Body, deaths[0]["reason"])
		}
	}
	if !got["queue-ttl"] || !got["msg-ttl"] {
		t.Fatalf("dead letters %v", got)
	}
	if messageCount(t, ch, "c.ttl.q")+messageCount(t, ch, "c.ttl.msg") != 0 {
		t.Fatal("expired messages still counted")
	}
}

func TestClassicMaxLengthDropHead(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareClassic(t, ch, "c.len.dead", nil)
	declareClassic(t, ch, "c.len", amqp091.Table{"x-max-length": int32(2), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "c.len.dead"})
	pub := confirmChannel(t, c)
	for _, b := range []string{"a", "b", "c"} {
		mustPublishConfirmed(t, pub, "", "c.len", b)
	}
	d := getOne(t, ch, "c.len.dead", true)
	if string(d.Body) != "a" || deathsOf(t, d)[0]["reason"] != "maxlen" {
		t.Fatalf("dead letter %q %v, want a maxlen", d.Body, deathsOf(t, d)[0]["reason"])
	}
	if got := drainQueue(t, ch, "c.len"); len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Fatalf("queue holds %v, want [b c]", got)
	}
}

func TestClassicMaxLengthRejectPublish(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareClassic(t, ch, "c.rp.dead", nil)
	declareClassic(t, ch, "c.rp", amqp091.Table{"x-max-length": int32(1), "x-overflow": "reject-publish", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "c.rp.dead"})
	declareClassic(t, ch, "c.rpd", amqp091.Table{"x-max-length": int32(1), "x-overflow": "reject-publish-dlx", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "c.rp.dead"})
	pub := confirmChannel(t, c)
	for _, q := range []string{"c.rp", "c.rpd"} {
		mustPublishConfirmed(t, pub, "", q, q+"-1")
		if publishConfirmed(t, pub, "", q, amqp091.Publishing{Body: []byte(q + "-2")}) {
			t.Fatalf("publish over the limit of %s acked", q)
		}
		if got := messageCount(t, ch, q); got != 1 {
			t.Fatalf("%s holds %d messages", q, got)
		}
	}
	// Only reject-publish-dlx dead-letters the refused message.
	d := getOne(t, ch, "c.rp.dead", true)
	if string(d.Body) != "c.rpd-2" || deathsOf(t, d)[0]["reason"] != "maxlen" {
		t.Fatalf("dead letter %q %v, want c.rpd-2 maxlen", d.Body, deathsOf(t, d)[0]["reason"])
	}
	barrier(t, ch)
	time.Sleep(50 * time.Millisecond) // time for a wrong dead letter to arrive: none is to be waited for
	if got := messageCount(t, ch, "c.rp.dead"); got != 0 {
		t.Fatalf("%d more dead letters", got)
	}
}

func TestClassicDeadLetterOnReject(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	if err := ch.ExchangeDeclare("c.dlx", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareClassic(t, ch, "c.rej.dead", nil)
	if err := ch.QueueBind("c.rej.dead", "", "c.dlx", false, nil); err != nil {
		t.Fatal(err)
	}
	declareClassic(t, ch, "c.rej", amqp091.Table{"x-dead-letter-exchange": "c.dlx"})
	pub := confirmChannel(t, c)
	mustPublishConfirmed(t, pub, "", "c.rej", "r")
	if err := getOne(t, ch, "c.rej", false).Reject(false); err != nil {
		t.Fatal(err)
	}
	d := getOne(t, ch, "c.rej.dead", true)
	wantDeath{queue: "c.rej", reason: "rejected", exchange: "", count: 1, keys: []string{"c.rej"}}.check(t, deathsOf(t, d)[0])
	if d.Exchange != "c.dlx" || d.RoutingKey != "c.rej" {
		t.Fatalf("dead letter via %q/%q", d.Exchange, d.RoutingKey)
	}
}

func TestClassicExpires(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareClassic(t, ch, "c.exp", amqp091.Table{"x-expires": int32(100)})
	testwait.For(t, 5*time.Second, "queue c.exp expired", func() bool { return !queueExists(t, c, "c.exp") })
}

func TestClassicSingleActiveConsumer(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareClassic(t, ch, "c.sac", amqp091.Table{"x-single-active-consumer": true})
	first, err := ch.Consume("c.sac", "first", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch2 := openChannel(t, c)
	second, err := ch2.Consume("c.sac", "second", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := confirmChannel(t, c)
	mustPublishConfirmed(t, pub, "", "c.sac", "1")
	mustPublishConfirmed(t, pub, "", "c.sac", "2")
	for _, want := range []string{"1", "2"} {
		d := receive(t, first)
		if string(d.Body) != want {
			t.Fatalf("active consumer got %q, want %q", d.Body, want)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	noDelivery(t, second)
	if err := ch.Cancel("first", false); err != nil {
		t.Fatal(err)
	}
	mustPublishConfirmed(t, pub, "", "c.sac", "3")
	if d := receive(t, second); string(d.Body) != "3" {
		t.Fatalf("new active consumer got %q", d.Body)
	}
}

func TestClassicMaxPriority(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareClassic(t, ch, "c.prio", amqp091.Table{"x-max-priority": int32(5)})
	declareClassic(t, ch, "c.fifo", nil)
	pub := confirmChannel(t, c)
	msgs := []struct {
		body string
		prio uint8
	}{{"none", 0}, {"p1", 1}, {"p9", 9}, {"p3", 3}, {"p5", 5}}
	for _, q := range []string{"c.prio", "c.fifo"} {
		for _, m := range msgs {
			if !publishConfirmed(t, pub, "", q, amqp091.Publishing{Body: []byte(m.body), Priority: m.prio}) {
				t.Fatal("nacked")
			}
		}
	}
	// 9 is capped at 5 and then in publish order with 5; no priority is 0.
	want := []string{"p9", "p5", "p3", "p1", "none"}
	got := drainQueue(t, ch, "c.prio")
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("priority queue order %v, want %v", got, want)
		}
	}
	// Without x-max-priority a classic queue ignores priorities.
	got = drainQueue(t, ch, "c.fifo")
	for i, m := range msgs {
		if i >= len(got) || got[i] != m.body {
			t.Fatalf("classic queue order %v, want publish order", got)
		}
	}
}

func TestClassicMaxPriorityValidated(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	for _, tc := range []struct {
		value any
		text  string
	}{
		{int32(256), "PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue 'prio' in vhost '/': {max_value_exceeded,256}"},
		{int32(-1), "PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue 'prio' in vhost '/': {value_negative,-1}"},
		{"ten", "PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue 'prio' in vhost '/': {unacceptable_type,longstr}"},
	} {
		ch := openChannel(t, c)
		_, err := ch.QueueDeclare("prio", false, false, false, false, amqp091.Table{"x-max-priority": tc.value})
		if e := wantCode(t, err, 406); e.Reason != tc.text {
			t.Errorf("x-max-priority %v: %q, want %q", tc.value, e.Reason, tc.text)
		}
	}
}

// TestClassicConsumerPriorityAndMaxLengthBytes: a higher-priority consumer
// with room gets every message, the lower one only what it cannot take;
// x-max-length-bytes drops from the head.
func TestClassicConsumerPriorityAndMaxLengthBytes(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareClassic(t, ch, "c.cprio", nil)
	high, low := openChannel(t, c), openChannel(t, c)
	if err := high.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	hd, err := high.Consume("c.cprio", "high", false, false, false, false, amqp091.Table{"x-priority": int32(10)})
	if err != nil {
		t.Fatal(err)
	}
	ld, err := low.Consume("c.cprio", "low", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := confirmChannel(t, c)
	for _, b := range []string{"1", "2", "3"} {
		mustPublishConfirmed(t, pub, "", "c.cprio", b)
	}
	if m := receive(t, hd); string(m.Body) != "1" {
		t.Fatalf("high got %q first", m.Body)
	}
	if m := receive(t, hd); string(m.Body) != "2" {
		t.Fatalf("high got %q second", m.Body)
	}
	if m := receive(t, ld); string(m.Body) != "3" {
		t.Fatalf("low got %q, want the message the full high consumer could not take", m.Body)
	}

	declareClassic(t, ch, "c.bytes", amqp091.Table{"x-max-length-bytes": int32(10)})
	for _, b := range []string{"aaaa", "bbbb", "cccc"} {
		mustPublishConfirmed(t, pub, "", "c.bytes", b)
	}
	if got := drainQueue(t, ch, "c.bytes"); len(got) != 2 || got[0] != "bbbb" || got[1] != "cccc" {
		t.Fatalf("queue holds %v, want [bbbb cccc]", got)
	}
}

// TestDurableClassicQueueRules runs classic rules on a durable classic
// queue, which keeps its messages in a one-member Raft log: TTL to a
// dead-letter queue, reject-publish-dlx, x-max-priority, and its messages
// across a restart.
func TestDurableClassicQueueRules(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declare := func(name string, args amqp091.Table) {
		t.Helper()
		if args == nil {
			args = amqp091.Table{}
		}
		args["x-queue-type"] = "classic"
		if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
	}
	declare("d.dead", nil)
	declare("d.full", amqp091.Table{"x-max-length": int32(1), "x-overflow": "reject-publish-dlx",
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "d.dead"})
	pub := confirmChannel(t, c)
	mustPublishConfirmed(t, pub, "", "d.full", "kept")
	if publishConfirmed(t, pub, "", "d.full", amqp091.Publishing{Body: []byte("refused")}) {
		t.Fatal("publish over the limit was confirmed, want a nack")
	}
	d := getOne(t, ch, "d.dead", true)
	if string(d.Body) != "refused" || deathsOf(t, d)[0]["reason"] != "maxlen" {
		t.Fatalf("dead letter %q %v", d.Body, deathsOf(t, d))
	}

	declare("d.prio", amqp091.Table{"x-max-priority": int32(5)})
	for _, p := range []uint8{1, 5, 3} {
		if !publishConfirmed(t, pub, "", "d.prio", amqp091.Publishing{Body: []byte{'0' + p}, Priority: p, DeliveryMode: 2}) {
			t.Fatal("priority publish nacked")
		}
	}
	n.restart()
	ch = openChannel(t, n.dial(t))
	if got := drainQueue(t, ch, "d.prio"); len(got) != 3 || got[0] != "5" || got[1] != "3" || got[2] != "1" {
		t.Fatalf("after a restart the durable classic queue holds %v, want [5 3 1]", got)
	}
	if got := drainQueue(t, ch, "d.full"); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("after a restart d.full holds %v", got)
	}
}
