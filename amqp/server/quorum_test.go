package server_test

// Quorum queue rules end to end: a real AMQP client (amqp091-go, or raw
// frames where it cannot say what is under test) against an in-process
// node, on x-queue-type=quorum queues. Each test names the RabbitMQ 4.3
// rule it checks; the state machine's own tests (raftq) check the rules in
// detail, these check that they reach the wire.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/raftq/testwait"
)

// declareQuorum declares a durable quorum queue with args added.
func declareQuorum(t testing.TB, ch *amqp091.Channel, name string, args amqp091.Table) {
	t.Helper()
	a := amqp091.Table{"x-queue-type": "quorum"}
	for k, v := range args {
		a[k] = v
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, a); err != nil {
		t.Fatalf("declare quorum queue %q: %v", name, err)
	}
}

// confirmChannel opens a channel in confirm mode.
func confirmChannel(t testing.TB, c *amqp091.Connection) *amqp091.Channel {
	t.Helper()
	ch := openChannel(t, c)
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("confirm.select: %v", err)
	}
	return ch
}

// publishConfirmed publishes on a confirm-mode channel and returns whether
// the server acked (true) or nacked (false) the message.
func publishConfirmed(t testing.TB, ch *amqp091.Channel, exchange, key string, p amqp091.Publishing) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, p)
	if err != nil {
		t.Fatalf("publish to %q/%q: %v", exchange, key, err)
	}
	ack, err := dc.WaitContext(ctx)
	if err != nil {
		t.Fatalf("wait for the confirm of a publish to %q/%q: %v", exchange, key, err)
	}
	return ack
}

// mustPublishConfirmed publishes body and fails unless it is acked.
func mustPublishConfirmed(t testing.TB, ch *amqp091.Channel, exchange, key, body string) {
	t.Helper()
	if !publishConfirmed(t, ch, exchange, key, amqp091.Publishing{Body: []byte(body)}) {
		t.Fatalf("publish of %q to %q/%q nacked", body, exchange, key)
	}
}

// getOne polls q with basic.get until it yields a message. Dead-lettering
// and expiry happen after the publish that causes them is confirmed, so
// their results need waiting for.
func getOne(t testing.TB, ch *amqp091.Channel, q string, autoAck bool) amqp091.Delivery {
	t.Helper()
	var d amqp091.Delivery
	testwait.For(t, 5*time.Second, fmt.Sprintf("a message in %q", q), func() bool {
		var ok bool
		var err error
		d, ok, err = ch.Get(q, autoAck)
		if err != nil {
			t.Fatalf("get from %q: %v", q, err)
		}
		return ok
	})
	return d
}

// messageCount is the queue's ready messages, by a passive declare.
func messageCount(t testing.TB, ch *amqp091.Channel, q string) int {
	t.Helper()
	st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("passive declare %q: %v", q, err)
	}
	return st.Messages
}

// deathsOf returns a message's x-death entries, newest first.
func deathsOf(t testing.TB, d amqp091.Delivery) []amqp091.Table {
	t.Helper()
	raw, ok := d.Headers["x-death"].([]any)
	if !ok {
		t.Fatalf("message %q has no x-death array: headers %v", d.Body, d.Headers)
	}
	out := make([]amqp091.Table, len(raw))
	for i, e := range raw {
		if out[i], ok = e.(amqp091.Table); !ok {
			t.Fatalf("x-death entry %d is %T", i, e)
		}
	}
	return out
}

// wantDeath checks one x-death entry.
type wantDeath struct {
	queue, reason, exchange string
	count                   int64
	keys                    []string
}

func (w wantDeath) check(t testing.TB, e amqp091.Table) {
	t.Helper()
	var keys []string
	raw, _ := e["routing-keys"].([]any)
	for _, k := range raw {
		s, _ := k.(string)
		keys = append(keys, s)
	}
	if e["queue"] != w.queue || e["reason"] != w.reason || e["exchange"] != w.exchange ||
		e["count"] != w.count || !slices.Equal(keys, w.keys) {
		t.Fatalf("x-death entry %v, want queue %q reason %q exchange %q count %d routing-keys %q",
			e, w.queue, w.reason, w.exchange, w.count, w.keys)
	}
	if ts, ok := e["time"].(time.Time); !ok || time.Since(ts) > time.Minute || time.Until(ts) > time.Minute {
		t.Fatalf("x-death time %v (%T), want about now", e["time"], e["time"])
	}
}

// wantHeader checks a header's value.
func wantHeader(t testing.TB, d amqp091.Delivery, key string, want any) {
	t.Helper()
	got, ok := d.Headers[key]
	if want == nil {
		if ok {
			t.Fatalf("message %q has header %s=%v, want none", d.Body, key, got)
		}
		return
	}
	if got != want {
		t.Fatalf("message %q has header %s=%#v, want %#v", d.Body, key, got, want)
	}
}

// TestQuorumConfirmAfterCommit: a quorum queue confirms a publish only once
// it is committed and applied, so the queue already counts every confirmed
// message when the confirm arrives, and a consumer then gets them in order.
func TestQuorumConfirmAfterCommit(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "qc", nil)
	pub := confirmChannel(t, c)
	other := openChannel(t, n.dial(t))
	const total = 50
	for i := range total {
		mustPublishConfirmed(t, pub, "", "qc", fmt.Sprint(i))
		// Right after the confirm, with no waiting, another connection
		// sees the message counted.
		if got := messageCount(t, other, "qc"); got != i+1 {
			t.Fatalf("after %d confirms the queue counts %d messages", i+1, got)
		}
	}
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("qc", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range total {
		d := receive(t, deliveries)
		if string(d.Body) != fmt.Sprint(i) || d.Redelivered {
			t.Fatalf("delivery %d is %q (redelivered %v)", i, d.Body, d.Redelivered)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 5*time.Second, "queue drained", func() bool { return messageCount(t, other, "qc") == 0 })
}

// TestQuorumDeliveryLimit: x-delivery-limit counts basic.reject (and a
// lost consumer), not basic.nack; redeliveries carry x-delivery-count and
// x-acquired-count; past the limit the message is dead-lettered with
// reason delivery_limit, and its x-death records where it was published.
func TestQuorumDeliveryLimit(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.ExchangeDeclare("src.x", "direct", true, false, false, false, nil))
	must(ch.ExchangeDeclare("dlx", "fanout", true, false, false, false, nil))
	declareQuorum(t, ch, "dl", amqp091.Table{"x-delivery-limit": int32(2), "x-dead-letter-exchange": "dlx"})
	must(ch.QueueBind("dl", "rk", "src.x", false, nil))
	declareQuorum(t, ch, "dl.dead", nil)
	must(ch.QueueBind("dl.dead", "", "dlx", false, nil))
	pub := confirmChannel(t, c)
	mustPublishConfirmed(t, pub, "src.x", "rk", "m")

	must(ch.Qos(1, 0, false))
	deliveries, err := ch.Consume("dl", "first", false, false, false, false, nil)
	must(err)
	// Nacks with requeue do not count: 4 of them, beyond the limit.
	for i := range 4 {
		d := receive(t, deliveries)
		wantHeader(t, d, "x-delivery-count", nil)
		if i == 0 {
			wantHeader(t, d, "x-acquired-count", nil)
		} else {
			wantHeader(t, d, "x-acquired-count", int64(i))
		}
		if d.Redelivered != (i > 0) {
			t.Fatalf("delivery %d redelivered=%v", i, d.Redelivered)
		}
		must(d.Nack(false, true))
	}
	// Rejects count: the third goes over the limit of 2.
	for i := range 3 {
		d := receive(t, deliveries)
		if i == 0 {
			wantHeader(t, d, "x-delivery-count", nil)
		} else {
			wantHeader(t, d, "x-delivery-count", int64(i))
		}
		wantHeader(t, d, "x-acquired-count", int64(4+i))
		must(d.Reject(true))
	}
	noDelivery(t, deliveries)

	dead := getOne(t, ch, "dl.dead", true)
	if string(dead.Body) != "m" || dead.Exchange != "dlx" || dead.RoutingKey != "rk" {
		t.Fatalf("dead letter %q via %q/%q, want \"m\" via dlx/rk", dead.Body, dead.Exchange, dead.RoutingKey)
	}
	ds := deathsOf(t, dead)
	if len(ds) != 1 {
		t.Fatalf("x-death has %d entries: %v", len(ds), ds)
	}
	wantDeath{queue: "dl", reason: "delivery_limit", exchange: "src.x", count: 1, keys: []string{"rk"}}.check(t, ds[0])
	for k, v := range map[string]string{
		"x-first-death-queue": "dl", "x-first-death-reason": "delivery_limit", "x-first-death-exchange": "src.x",
		"x-last-death-queue": "dl", "x-last-death-reason": "delivery_limit", "x-last-death-exchange": "src.x",
	} {
		wantHeader(t, dead, k, v)
	}
	if messageCount(t, ch, "dl") != 0 {
		t.Fatal("the dead-lettered message is still in its queue")
	}

	// A consumer lost with the message unacknowledged counts too.
	must(ch.Cancel("first", false))
	mustPublishConfirmed(t, pub, "src.x", "rk", "lost")
	lost := openChannel(t, c)
	ld, err := lost.Consume("dl", "", false, false, false, false, nil)
	must(err)
	if d := receive(t, ld); string(d.Body) != "lost" {
		t.Fatalf("got %q", d.Body)
	}
	lost.Close()
	d := getOne(t, ch, "dl", true)
	wantHeader(t, d, "x-delivery-count", int64(1))
	wantHeader(t, d, "x-acquired-count", int64(1))
}

// TestQuorumRejectedDeadLettered: basic.reject and basic.nack without
// requeue dead-letter with reason rejected, to x-dead-letter-routing-key
// when it is given; without a dead-letter exchange they are dropped.
func TestQuorumRejectedDeadLettered(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "rj", amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "rj.dead"})
	declareQuorum(t, ch, "rj.dead", nil)
	declareQuorum(t, ch, "rj.nodlx", nil)
	declareQuorum(t, ch, "rj.missing", amqp091.Table{"x-dead-letter-exchange": "no.such.exchange"})
	pub := confirmChannel(t, c)
	for _, b := range []string{"a", "b"} {
		mustPublishConfirmed(t, pub, "", "rj", b)
	}
	mustPublishConfirmed(t, pub, "", "rj.nodlx", "c")
	mustPublishConfirmed(t, pub, "", "rj.missing", "d")
	d := getOne(t, ch, "rj", false)
	if err := d.Reject(false); err != nil {
		t.Fatal(err)
	}
	d = getOne(t, ch, "rj", false)
	if err := d.Nack(false, false); err != nil {
		t.Fatal(err)
	}
	// Without a dead-letter exchange, or with one that does not exist,
	// a rejected message is dropped.
	for _, q := range []string{"rj.nodlx", "rj.missing"} {
		if err := getOne(t, ch, q, false).Reject(false); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"a", "b"} {
		dead := getOne(t, ch, "rj.dead", true)
		if string(dead.Body) != want || dead.Exchange != "" || dead.RoutingKey != "rj.dead" {
			t.Fatalf("dead letter %q via %q/%q, want %q via the default exchange/rj.dead", dead.Body, dead.Exchange, dead.RoutingKey, want)
		}
		wantDeath{queue: "rj", reason: "rejected", exchange: "", count: 1, keys: []string{"rj"}}.check(t, deathsOf(t, dead)[0])
	}
	barrier(t, ch)
	if got := messageCount(t, ch, "rj") + messageCount(t, ch, "rj.nodlx") + messageCount(t, ch, "rj.missing"); got != 0 {
		t.Fatalf("%d rejected messages still queued", got)
	}
}

// TestQuorumMessageTTL: x-message-ttl and the expiration property expire
// messages at the head of the queue, dead-lettered with reason expired; the
// expiration moves into x-death's original-expiration.
func TestQuorumMessageTTL(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "ttl.dead", nil)
	dlx := amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "ttl.dead"}
	declareQuorum(t, ch, "ttl.q", amqp091.Table{"x-message-ttl": int32(30), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "ttl.dead"})
	declareQuorum(t, ch, "ttl.msg", dlx)
	pub := confirmChannel(t, c)

	mustPublishConfirmed(t, pub, "", "ttl.q", "by-queue")
	dead := getOne(t, ch, "ttl.dead", true)
	if string(dead.Body) != "by-queue" {
		t.Fatalf("dead letter %q", dead.Body)
	}
	e := deathsOf(t, dead)[0]
	wantDeath{queue: "ttl.q", reason: "expired", exchange: "", count: 1, keys: []string{"ttl.q"}}.check(t, e)
	if _, ok := e["original-expiration"]; ok {
		t.Fatalf("queue TTL recorded as original-expiration: %v", e)
	}

	// Per-message expiration, behind a message that never expires: it
	// waits until it reaches the head.
	mustPublishConfirmed(t, pub, "", "ttl.msg", "first")
	if !publishConfirmed(t, pub, "", "ttl.msg", amqp091.Publishing{Body: []byte("short"), Expiration: "20"}) {
		t.Fatal("publish nacked")
	}
	time.Sleep(150 * time.Millisecond) // well past the expiry: it must still wait behind "first"
	if got := messageCount(t, ch, "ttl.msg"); got != 2 {
		t.Fatalf("ttl.msg holds %d messages, want 2 (an expired message waits behind the head)", got)
	}
	if d := getOne(t, ch, "ttl.msg", true); string(d.Body) != "first" {
		t.Fatalf("got %q, want \"first\"", d.Body)
	}
	dead = getOne(t, ch, "ttl.dead", true)
	if string(dead.Body) != "short" || dead.Expiration != "" {
		t.Fatalf("dead letter %q with expiration %q, want \"short\" without one", dead.Body, dead.Expiration)
	}
	e = deathsOf(t, dead)[0]
	wantDeath{queue: "ttl.msg", reason: "expired", exchange: "", count: 1, keys: []string{"ttl.msg"}}.check(t, e)
	if e["original-expiration"] != "20" {
		t.Fatalf("original-expiration %#v, want \"20\"", e["original-expiration"])
	}
	if got := messageCount(t, ch, "ttl.msg"); got != 0 {
		t.Fatalf("ttl.msg holds %d messages", got)
	}
}

// TestQuorumMaxLength: x-max-length and x-max-length-bytes with drop-head
// dead-letter the oldest messages with reason maxlen; with
// x-overflow=reject-publish the publisher gets basic.nack instead.
func TestQuorumMaxLength(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "ml.dead", nil)
	declareQuorum(t, ch, "ml", amqp091.Table{"x-max-length": int32(2), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "ml.dead"})
	declareQuorum(t, ch, "ml.bytes", amqp091.Table{"x-max-length-bytes": int32(10)})
	declareQuorum(t, ch, "ml.reject", amqp091.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
	pub := confirmChannel(t, c)

	for _, b := range []string{"1", "2", "3", "4"} {
		mustPublishConfirmed(t, pub, "", "ml", b)
	}
	if got := drainQueue(t, ch, "ml"); !slices.Equal(got, []string{"3", "4"}) {
		t.Fatalf("ml holds %q, want [3 4]", got)
	}
	for _, want := range []string{"1", "2"} {
		dead := getOne(t, ch, "ml.dead", true)
		if string(dead.Body) != want {
			t.Fatalf("dead letter %q, want %q", dead.Body, want)
		}
		wantDeath{queue: "ml", reason: "maxlen", exchange: "", count: 1, keys: []string{"ml"}}.check(t, deathsOf(t, dead)[0])
	}

	for _, b := range []string{"aaaa", "bbbb", "cccc"} {
		mustPublishConfirmed(t, pub, "", "ml.bytes", b)
	}
	if got := drainQueue(t, ch, "ml.bytes"); !slices.Equal(got, []string{"bbbb", "cccc"}) {
		t.Fatalf("ml.bytes holds %q, want [bbbb cccc]", got)
	}

	var acks []bool
	for _, b := range []string{"x", "y", "z"} {
		acks = append(acks, publishConfirmed(t, pub, "", "ml.reject", amqp091.Publishing{Body: []byte(b)}))
	}
	if !slices.Equal(acks, []bool{true, true, false}) {
		t.Fatalf("confirms %v, want ack, ack, nack", acks)
	}
	if got := drainQueue(t, ch, "ml.reject"); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("ml.reject holds %q, want [x y]", got)
	}
	if !publishConfirmed(t, pub, "", "ml.reject", amqp091.Publishing{Body: []byte("room")}) {
		t.Fatal("publish nacked though the queue has room again")
	}
}

// TestQuorumAtLeastOnceDeadLettering: with x-dead-letter-strategy
// at-least-once (and reject-publish), a dead-lettered message stays in its
// queue, counted against the limits, until its target queues confirm it:
// across a restart, and until a route to a target exists.
func TestQuorumAtLeastOnceDeadLettering(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "alo", amqp091.Table{
		"x-dead-letter-exchange": "alo.dlx",
		"x-dead-letter-strategy": "at-least-once",
		"x-overflow":             "reject-publish",
		"x-max-length":           int32(2),
	})
	pub := confirmChannel(t, c)
	mustPublishConfirmed(t, pub, "", "alo", "a")
	mustPublishConfirmed(t, pub, "", "alo", "b")
	for range 2 {
		if err := getOne(t, ch, "alo", false).Reject(false); err != nil {
			t.Fatal(err)
		}
	}
	// The exchange does not exist: both wait in the queue, not ready,
	// and still count against x-max-length.
	barrier(t, ch)
	if got := messageCount(t, ch, "alo"); got != 0 {
		t.Fatalf("alo has %d ready messages", got)
	}
	if publishConfirmed(t, pub, "", "alo", amqp091.Publishing{Body: []byte("c")}) {
		t.Fatal("publish acked though two dead letters still fill the queue")
	}

	n.restart()
	c = n.dial(t)
	ch = openChannel(t, c)
	if err := ch.ExchangeDeclare("alo.dlx", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareQuorum(t, ch, "alo.target", nil)
	if err := ch.QueueBind("alo.target", "", "alo.dlx", false, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		d := getOne(t, ch, "alo.target", true)
		got = append(got, string(d.Body))
		wantDeath{queue: "alo", reason: "rejected", exchange: "", count: 1, keys: []string{"alo"}}.check(t, deathsOf(t, d)[0])
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("target got %q, want [a b]", got)
	}
	// Settled: the queue has room again.
	pub = confirmChannel(t, c)
	testwait.For(t, 5*time.Second, "room in alo once its dead letters are settled", func() bool {
		return publishConfirmed(t, pub, "", "alo", amqp091.Publishing{Body: []byte("d")})
	})
}

// TestQuorumDeathHistory: x-death keeps one entry per queue and reason,
// newest first, counting repeats; x-first-death-* stay those of the first
// death. A cycle of deaths without a rejection is cut.
func TestQuorumDeathHistory(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	// h1 -(expired)-> h2 -(expired)-> h3 -(rejected)-> h1 ...
	to := func(q string, ttl bool) amqp091.Table {
		a := amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": q}
		if ttl {
			a["x-message-ttl"] = int32(20)
		}
		return a
	}
	declareQuorum(t, ch, "h1", to("h2", true))
	declareQuorum(t, ch, "h2", to("h3", true))
	declareQuorum(t, ch, "h3", to("h1", false))
	pub := confirmChannel(t, c)
	mustPublishConfirmed(t, pub, "", "h1", "m")

	d := getOne(t, ch, "h3", false)
	ds := deathsOf(t, d)
	if len(ds) != 2 {
		t.Fatalf("x-death %v, want 2 entries", ds)
	}
	wantDeath{queue: "h2", reason: "expired", exchange: "", count: 1, keys: []string{"h2"}}.check(t, ds[0])
	wantDeath{queue: "h1", reason: "expired", exchange: "", count: 1, keys: []string{"h1"}}.check(t, ds[1])
	wantHeader(t, d, "x-first-death-queue", "h1")
	wantHeader(t, d, "x-last-death-queue", "h2")

	// Round two: the rejection breaks the cycle, so the message goes
	// around again, and each entry counts its second death.
	if err := d.Reject(false); err != nil {
		t.Fatal(err)
	}
	d = getOne(t, ch, "h3", true)
	ds = deathsOf(t, d)
	if len(ds) != 3 {
		t.Fatalf("x-death %v, want 3 entries", ds)
	}
	wantDeath{queue: "h2", reason: "expired", exchange: "", count: 2, keys: []string{"h2"}}.check(t, ds[0])
	wantDeath{queue: "h1", reason: "expired", exchange: "", count: 2, keys: []string{"h1"}}.check(t, ds[1])
	wantDeath{queue: "h3", reason: "rejected", exchange: "", count: 1, keys: []string{"h3"}}.check(t, ds[2])
	for k, v := range map[string]string{
		"x-first-death-queue": "h1", "x-first-death-reason": "expired",
		"x-last-death-queue": "h2", "x-last-death-reason": "expired",
	} {
		wantHeader(t, d, k, v)
	}

	// A queue that dead-letters expired messages back to itself: the
	// cycle is dropped, the other target still gets the message, once.
	if err := ch.ExchangeDeclare("cyc", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareQuorum(t, ch, "cyc.q", amqp091.Table{"x-message-ttl": int32(20), "x-dead-letter-exchange": "cyc"})
	declareQuorum(t, ch, "cyc.sink", nil)
	for _, q := range []string{"cyc.q", "cyc.sink"} {
		if err := ch.QueueBind(q, "", "cyc", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	mustPublishConfirmed(t, pub, "", "cyc.q", "loop")
	testwait.For(t, 5*time.Second, "one dead letter in cyc.sink", func() bool { return messageCount(t, ch, "cyc.sink") == 1 })
	time.Sleep(300 * time.Millisecond) // a cycle would expire it again every ~100 ms
	if got := messageCount(t, ch, "cyc.sink"); got != 1 {
		t.Fatalf("cyc.sink got %d dead letters, want 1", got)
	}
	if got := messageCount(t, ch, "cyc.q"); got != 0 {
		t.Fatalf("the cycling message is back in cyc.q")
	}
}

// TestQuorumExpires: x-expires deletes a queue left unused, and a
// redeclaration renews the lease.
func TestQuorumExpires(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	args := amqp091.Table{"x-expires": int32(400)}
	declareQuorum(t, ch, "exp", args)
	mustPublishConfirmed(t, confirmChannel(t, c), "", "exp", "held") // messages do not keep it alive
	for start := time.Now(); time.Since(start) < 1200*time.Millisecond; {
		declareQuorum(t, ch, "exp", args)
		time.Sleep(50 * time.Millisecond) // the client's redeclaring cadence
	}
	// Still the same queue (a deleted one would have been declared anew,
	// empty).
	if got := messageCount(t, ch, "exp"); got != 1 {
		t.Fatalf("queue holds %d messages: it expired although it was redeclared every 50 ms", got)
	}
	testwait.For(t, 5*time.Second, "queue deleted by x-expires", func() bool { return !queueExists(t, c, "exp") })
	// It is gone for good: declaring again makes a new, empty queue.
	declareQuorum(t, ch, "exp", nil)
	if got := messageCount(t, ch, "exp"); got != 0 {
		t.Fatalf("the new queue holds %d messages", got)
	}
}

// TestQuorumSingleActiveConsumer: one consumer at a time; the next takes
// over when it cancels; a higher-priority consumer takes over once the
// active one has no unacknowledged messages left; basic.get is refused.
func TestQuorumSingleActiveConsumer(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "sac", amqp091.Table{"x-single-active-consumer": true})
	pub := confirmChannel(t, c)

	consume := func(tag string, priority int32) (*amqp091.Channel, <-chan amqp091.Delivery) {
		t.Helper()
		cch := openChannel(t, c)
		if err := cch.Qos(10, 0, false); err != nil {
			t.Fatal(err)
		}
		d, err := cch.Consume("sac", tag, false, false, false, false, amqp091.Table{"x-priority": priority})
		if err != nil {
			t.Fatal(err)
		}
		return cch, d
	}
	chA, a := consume("a", 0)
	_, b := consume("b", 0)
	for _, m := range []string{"1", "2", "3"} {
		mustPublishConfirmed(t, pub, "", "sac", m)
	}
	for _, want := range []string{"1", "2", "3"} {
		d := receive(t, a)
		if string(d.Body) != want {
			t.Fatalf("active consumer got %q, want %q", d.Body, want)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	noDelivery(t, b)
	if err := chA.Cancel("a", false); err != nil {
		t.Fatal(err)
	}
	mustPublishConfirmed(t, pub, "", "sac", "4")
	held := receive(t, b)
	if string(held.Body) != "4" {
		t.Fatalf("new active consumer got %q", held.Body)
	}

	// B holds "4" unacknowledged; C, of higher priority, arrives: B gets
	// nothing more, and C nothing until B has drained.
	_, cc := consume("c", 5)
	mustPublishConfirmed(t, pub, "", "sac", "5")
	noDelivery(t, b)
	noDelivery(t, cc)
	if err := held.Ack(false); err != nil {
		t.Fatal(err)
	}
	if d := receive(t, cc); string(d.Body) != "5" {
		t.Fatalf("higher-priority consumer got %q", d.Body)
	}
	noDelivery(t, b)

	_, _, err := openChannel(t, c).Get("sac", false)
	wantError(t, err, amqp091.ResourceLocked, `RESOURCE_LOCKED - cannot obtain access to locked queue 'sac' in vhost '/'. basic.get operations are not supported by <<"quorum">> queues with single active consumer`)
}

// TestQuorumConsumerPriority: consumers of higher x-priority are served
// first while they have prefetch room.
func TestQuorumConsumerPriority(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "cp", nil)
	consume := func(prefetch int, priority int32) <-chan amqp091.Delivery {
		t.Helper()
		cch := openChannel(t, c)
		if err := cch.Qos(prefetch, 0, false); err != nil {
			t.Fatal(err)
		}
		d, err := cch.Consume("cp", "", false, false, false, false, amqp091.Table{"x-priority": priority})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	low := consume(10, 0)
	high := consume(2, 10)
	pub := confirmChannel(t, c)
	for i := range 6 {
		mustPublishConfirmed(t, pub, "", "cp", fmt.Sprint(i))
	}
	var h []amqp091.Delivery
	for range 2 {
		h = append(h, receive(t, high))
	}
	var l []string
	for range 4 {
		l = append(l, string(receive(t, low).Body))
	}
	if string(h[0].Body) != "0" || string(h[1].Body) != "1" || !slices.Equal(l, []string{"2", "3", "4", "5"}) {
		t.Fatalf("high got %q %q, low got %q", h[0].Body, h[1].Body, l)
	}
	// An ack gives the high-priority consumer room: the next is its. The
	// ack reaches the log through the settler, after the channel has
	// handled it (a barrier is not enough): wait until it is applied, or
	// the next message may go to the low-priority consumer first.
	if err := h[0].Ack(false); err != nil {
		t.Fatal(err)
	}
	v, err := n.Broker().OpenVhost(&broker.User{Name: "guest"}, "/")
	if err != nil {
		t.Fatal(err)
	}
	bq, err := v.LookupQueue(nil, 0, "cp", broker.Read)
	if err != nil {
		t.Fatal(err)
	}
	testwait.ForNil(t, 5*time.Second, "the ack applied", func() error {
		if st := bq.Engine().Stats(); st.Unacked != 5 {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	mustPublishConfirmed(t, pub, "", "cp", "6")
	if d := receive(t, high); string(d.Body) != "6" {
		t.Fatalf("high got %q", d.Body)
	}
	noDelivery(t, low)
}

// TestQuorumMessagePriority: as RabbitMQ 4.3 quorum queues do, higher
// priority messages go first (levels 0-31, no x-max-priority needed), a
// message without priority counts as 4, and within a level publish order
// holds; a returned message goes ahead of every never-delivered one.
func TestQuorumMessagePriority(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "mp", nil)
	pub := confirmChannel(t, c)
	send := func(body string, priority int) {
		t.Helper()
		p := amqp091.Publishing{Body: []byte(body)}
		if priority >= 0 {
			p.Priority = uint8(priority)
		}
		if !publishConfirmed(t, pub, "", "mp", p) {
			t.Fatal("publish nacked")
		}
	}
	send("p1", 1)
	send("unset", -1)
	send("p9", 9)
	send("p4", 4)
	send("p5", 5)
	send("p40", 40) // above 31: the top level, 31
	// (amqp091-go sends no priority property for priority 0, so "unset"
	// is all it can say below 1.)
	if got := drainQueue(t, ch, "mp"); !slices.Equal(got, []string{"p40", "p9", "p5", "unset", "p4", "p1"}) {
		t.Fatalf("order %q", got)
	}

	send("low", 0)
	d := getOne(t, ch, "mp", false)
	send("high", 9)
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	if got := drainQueue(t, ch, "mp"); !slices.Equal(got, []string{"low", "high"}) {
		t.Fatalf("order %q, want the returned message first", got)
	}
}

// TestQuorumConsumerTimeout: a delivery left unacknowledged past
// x-consumer-timeout (the consumer's argument, or the queue's) returns to
// the queue, not counted as a failed delivery, and the consumer is
// cancelled with basic.cancel, its channel left open.
func TestQuorumConsumerTimeout(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "ct.consumer", nil)
	declareQuorum(t, ch, "ct.queue", amqp091.Table{"x-consumer-timeout": int32(50)})
	pub := confirmChannel(t, c)
	for _, tc := range []struct {
		queue string
		args  amqp091.Table
	}{
		{"ct.consumer", amqp091.Table{"x-consumer-timeout": int32(50)}},
		{"ct.queue", nil},
	} {
		mustPublishConfirmed(t, pub, "", tc.queue, "slow")
		cch := openChannel(t, c)
		cancelled := cch.NotifyCancel(make(chan string, 1))
		deliveries, err := cch.Consume(tc.queue, "slowpoke", false, false, false, false, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		first := receive(t, deliveries)
		if string(first.Body) != "slow" || first.Redelivered {
			t.Fatalf("%s: got %q redelivered=%v", tc.queue, first.Body, first.Redelivered)
		}
		select {
		case tag := <-cancelled:
			if tag != "slowpoke" {
				t.Fatalf("%s: basic.cancel for %q", tc.queue, tag)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no basic.cancel after the consumer timeout", tc.queue)
		}
		// The channel is still open; the message is back, and a late ack
		// of the timed-out delivery does not settle it for whoever holds
		// it now.
		d := getOne(t, cch, tc.queue, false)
		if string(d.Body) != "slow" || !d.Redelivered {
			t.Fatalf("%s: got %q redelivered=%v, want the timed-out message back", tc.queue, d.Body, d.Redelivered)
		}
		wantHeader(t, d, "x-delivery-count", nil)
		wantHeader(t, d, "x-acquired-count", int64(1))
		if err := first.Ack(false); err != nil {
			t.Fatal(err)
		}
		barrier(t, cch)
		if err := d.Nack(false, true); err != nil {
			t.Fatal(err)
		}
		if d := getOne(t, ch, tc.queue, true); string(d.Body) != "slow" {
			t.Fatalf("%s: got %q after the late ack", tc.queue, d.Body)
		}
		cch.Close()
	}
}

// TestQuorumConsumerTimeoutClosesChannel: a client that did not announce
// consumer_cancel_notify has its channel closed with 406 instead, with
// RabbitMQ's text, and the message returns.
func TestQuorumConsumerTimeoutClosesChannel(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "ctc", nil)
	mustPublishConfirmed(t, confirmChannel(t, c), "", "ctc", "slow")

	rc := dialRaw(t, n)
	rc.start("PLAIN", plainResponse("guest", "guest"), wire.Table{"publisher_confirms": true})
	tune := expectRaw[*wire.ConnectionTune](rc, 0)
	rc.send(0, &wire.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax, Heartbeat: 0})
	rc.send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	expectRaw[*wire.ConnectionOpenOk](rc, 0)
	rc.openChannel(3)
	rc.send(3, &wire.BasicConsume{Queue: "ctc", ConsumerTag: "slowpoke", Arguments: wire.Table{"x-consumer-timeout": int64(40)}})
	expectRaw[*wire.BasicConsumeOk](rc, 3)
	expectRaw[*wire.BasicDeliver](rc, 3)
	for range 2 { // content header and body
		if f := rc.next(); f.Type != wire.FrameHeader && f.Type != wire.FrameBody {
			t.Fatalf("got a frame of type %d, want the delivery's content", f.Type)
		}
	}
	cl := expectRaw[*wire.ChannelClose](rc, 3)
	want := "PRECONDITION_FAILED - delivery acknowledgement on channel 3 timed out. Timeout value used: 40 ms. " +
		"This timeout value can be configured, see consumers doc guide to learn more"
	if cl.ReplyCode != wire.PreconditionFailed || cl.ReplyText != want || cl.FailingClassID != 0 || cl.FailingMethodID != 0 {
		t.Fatalf("got %s, want 406 %q", describe(cl), want)
	}
	rc.send(3, &wire.ChannelCloseOk{})
	// The connection lives on.
	rc.openChannel(4)
	d := getOne(t, ch, "ctc", true)
	if string(d.Body) != "slow" || !d.Redelivered {
		t.Fatalf("got %q redelivered=%v, want the timed-out message back", d.Body, d.Redelivered)
	}
}

// TestQuorumSurvivesRestart: confirmed messages survive a node restart;
// acknowledged ones do not come back; unacknowledged ones return.
func TestQuorumSurvivesRestart(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "rs", nil)
	pub := confirmChannel(t, c)
	for i := range 10 {
		mustPublishConfirmed(t, pub, "", "rs", fmt.Sprint(i))
	}
	if err := ch.Qos(4, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("rs", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		d := receive(t, deliveries)
		if i < 2 {
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The acks make room for two more deliveries: once the queue shows
	// them gone, the acks are in.
	other := openChannel(t, n.dial(t))
	testwait.For(t, 5*time.Second, "4 ready", func() bool { return messageCount(t, other, "rs") == 4 })

	n.restart()
	ch = openChannel(t, n.dial(t))
	got := drainQueue(t, ch, "rs")
	slices.Sort(got)
	if !slices.Equal(got, []string{"2", "3", "4", "5", "6", "7", "8", "9"}) {
		t.Fatalf("after the restart the queue holds %q", got)
	}
}

// TestQuorumPurgeAndGet: basic.get reports the messages left; queue.purge
// removes the ready messages and says how many, leaving unacknowledged
// ones alone.
func TestQuorumPurgeAndGet(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQuorum(t, ch, "pg", nil)
	pub := confirmChannel(t, c)
	for i := range 5 {
		mustPublishConfirmed(t, pub, "", "pg", fmt.Sprint(i))
	}
	for i := range 2 {
		d, ok, err := ch.Get("pg", false)
		if err != nil || !ok {
			t.Fatalf("get: ok=%v err=%v", ok, err)
		}
		if string(d.Body) != fmt.Sprint(i) || d.MessageCount != uint32(4-i) {
			t.Fatalf("get %d: %q with message-count %d", i, d.Body, d.MessageCount)
		}
	}
	n2, err := ch.QueuePurge("pg", false)
	if err != nil || n2 != 3 {
		t.Fatalf("purge: %d, %v; want 3", n2, err)
	}
	if _, ok, err := ch.Get("pg", true); ok || err != nil {
		t.Fatalf("get after purge: ok=%v err=%v", ok, err)
	}
	// The two unacknowledged messages were not purged: they come back
	// when the channel closes.
	ch.Close()
	ch = openChannel(t, c)
	testwait.For(t, 5*time.Second, "the unacked messages back", func() bool { return messageCount(t, ch, "pg") == 2 })
	if got := drainQueue(t, ch, "pg"); !slices.Equal(got, []string{"0", "1"}) {
		t.Fatalf("after purge and requeue the queue holds %q", got)
	}
}

// TestQuorumDelayedRetry: RabbitMQ 4.3's delayed retry. With
// x-delayed-retry-type failed, a rejected message waits min(Min ×
// x-delivery-count, Max) before it is delivered again, counted neither
// ready nor unacknowledged meanwhile; a nack (not a failed delivery)
// comes back at once; a purge takes waiting messages too.
func TestQuorumDelayedRetry(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	const minDelay, maxDelay = 300 * time.Millisecond, 500 * time.Millisecond
	declareQuorum(t, ch, "retry", amqp091.Table{
		"x-delayed-retry-type": "failed", "x-delayed-retry-min": int32(minDelay / time.Millisecond), "x-delayed-retry-max": int32(maxDelay / time.Millisecond),
	})
	pub := confirmChannel(t, c)
	mustPublishConfirmed(t, pub, "", "retry", "m")
	check := openChannel(t, c)

	cons := openChannel(t, c)
	if err := cons.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := cons.Consume("retry", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := receive(t, deliveries)
	// Rejected twice: delivery-count 1 then 2, so 300 then 500 ms (the
	// maximum) before each redelivery; the queue counts it nowhere
	// while it waits.
	for i, want := range []time.Duration{minDelay, maxDelay} {
		rejected := time.Now()
		if err := d.Reject(true); err != nil {
			t.Fatal(err)
		}
		if got := messageCount(t, check, "retry"); got != 0 {
			t.Fatalf("while waiting: %d messages ready, want 0", got)
		}
		d = receive(t, deliveries)
		// The machine's clock is whole milliseconds (a command's Now is
		// truncated), so the delay may end up to 1 ms early as the test
		// measures it.
		if waited := time.Since(rejected); waited < want-time.Millisecond {
			t.Fatalf("reject %d: delivered again after %v, before the %v delay", i+1, waited, want)
		}
		wantHeader(t, d, "x-delivery-count", int64(i+1))
	}
	// A nack with requeue is no failed delivery: back at once.
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	d = receive(t, deliveries)
	wantHeader(t, d, "x-delivery-count", int64(2))

	// Waiting messages are purged with the ready ones.
	if err := cons.Cancel(d.ConsumerTag, false); err != nil {
		t.Fatal(err)
	}
	if err := d.Reject(true); err != nil {
		t.Fatal(err)
	}
	if n, err := check.QueuePurge("retry", false); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v; want the waiting message", n, err)
	}
	time.Sleep(maxDelay + 100*time.Millisecond) // past the delay, when a purged message would come back
	if _, ok, err := check.Get("retry", true); ok || err != nil {
		t.Fatalf("get after the purge and the delay: ok=%v err=%v", ok, err)
	}
}
