package server_test

import (
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/raftq/testwait"
)

func TestQueueNameLimits(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)

	long := strings.Repeat("q", 255)
	q := declareQueue(t, ch, long)
	if q.Name != long {
		t.Fatalf("declare-ok names %d bytes, want 255", len(q.Name))
	}
	publishBody(t, ch, "", long, "hello")
	if got := drainQueue(t, ch, long); len(got) != 1 || got[0] != "hello" {
		t.Fatalf("255-byte queue holds %q", got)
	}

	for _, name := range []string{"amq.mine", "amq."} {
		_, err := openChannel(t, c).QueueDeclare(name, false, false, false, false, nil)
		wantError(t, err, amqp091.AccessRefused, "ACCESS_REFUSED - queue name '"+name+"' contains reserved prefix 'amq.*'")
	}
}

func TestServerNamedQueueAndLastDeclared(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)

	q, err := ch.QueueDeclare("", false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(q.Name, "amq.gen-") || len(q.Name) != len("amq.gen-")+22 {
		t.Fatalf("server-named queue %q, want amq.gen- and 22 characters", q.Name)
	}
	if q2 := declareQueue(t, ch, ""); q2.Name == q.Name {
		t.Fatal("two server-named queues got the same name")
	}
	// The channel now remembers the second; declare the first again
	// (passively, by name) to make it the last declared queue.
	if _, err := ch.QueueDeclarePassive(q.Name, false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}

	// bind with an empty queue name and routing key: the last queue, by its
	// own name as the key.
	if err := ch.QueueBind("", "", "amq.direct", false, nil); err != nil {
		t.Fatalf("bind \"\": %v", err)
	}
	publishBody(t, ch, "amq.direct", q.Name, "one")
	publishBody(t, ch, "amq.direct", q.Name, "two")
	publishBody(t, ch, "amq.direct", q.Name, "three")

	// get "".
	d, ok, err := ch.Get("", false)
	if err != nil || !ok || string(d.Body) != "one" || d.MessageCount != 2 {
		t.Fatalf("get \"\" = %q (count %d) ok=%v err=%v, want \"one\" with 2 remaining", d.Body, d.MessageCount, ok, err)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
	// passive declare "": the last queue's counts.
	pq, err := ch.QueueDeclarePassive("", false, false, true, false, nil)
	if err != nil || pq.Name != q.Name || pq.Messages != 2 {
		t.Fatalf("passive declare \"\" = %+v, %v; want %s with 2 messages", pq, err, q.Name)
	}
	// unbind "": publishing by the name no longer reaches it.
	if err := ch.QueueUnbind("", "", "amq.direct", nil); err != nil {
		t.Fatalf("unbind \"\": %v", err)
	}
	publishBody(t, ch, "amq.direct", q.Name, "lost")
	// purge "".
	if n, err := ch.QueuePurge("", false); err != nil || n != 2 {
		t.Fatalf("purge \"\" = %d, %v; want 2", n, err)
	}
	// consume "".
	publishBody(t, ch, "", q.Name, "four")
	deliveries, err := ch.Consume("", "c1", true, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume \"\": %v", err)
	}
	if m := receive(t, deliveries); string(m.Body) != "four" {
		t.Fatalf("consumer got %q", m.Body)
	}
	if err := ch.Cancel("c1", false); err != nil {
		t.Fatal(err)
	}
	// delete "": returns the count and removes it.
	publishBody(t, ch, "", q.Name, "five")
	if n, err := ch.QueueDelete("", false, false, false); err != nil || n != 1 {
		t.Fatalf("delete \"\" = %d, %v; want 1", n, err)
	}
	if queueExists(t, c, q.Name) {
		t.Fatal("queue still exists after delete \"\"")
	}
}

func TestNoPreviouslyDeclaredQueue(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	const text = "NOT_FOUND - no previously declared queue"
	for name, op := range map[string]func(*amqp091.Channel) error{
		"bind":   func(ch *amqp091.Channel) error { return ch.QueueBind("", "k", "amq.direct", false, nil) },
		"unbind": func(ch *amqp091.Channel) error { return ch.QueueUnbind("", "k", "amq.direct", nil) },
		"purge":  func(ch *amqp091.Channel) error { _, err := ch.QueuePurge("", false); return err },
		"delete": func(ch *amqp091.Channel) error { _, err := ch.QueueDelete("", false, false, false); return err },
		"get":    func(ch *amqp091.Channel) error { _, _, err := ch.Get("", false); return err },
		"consume": func(ch *amqp091.Channel) error {
			_, err := ch.Consume("", "", false, false, false, false, nil)
			return err
		},
		"passive": func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("", false, false, false, false, nil)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, op(openChannel(t, c)), amqp091.NotFound, text)
		})
	}
	// Another channel's declaration does not count.
	declareQueue(t, openChannel(t, c), "elsewhere")
	_, _, err := openChannel(t, c).Get("", false)
	wantError(t, err, amqp091.NotFound, text)
}

func TestQueueDeclareEquivalence(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)

	ttl := amqp091.Table{"x-message-ttl": int32(1000), "x-custom": "a"}
	if _, err := ch.QueueDeclare("eqq", false, false, false, false, ttl); err != nil {
		t.Fatal(err)
	}
	// Integers of other widths with the same value are equivalent, and
	// unknown arguments are not compared.
	for _, v := range []any{int64(1000), int16(1000), uint16(1000), uint32(1000)} {
		args := amqp091.Table{"x-message-ttl": v, "x-custom": "b"}
		if _, err := ch.QueueDeclare("eqq", false, false, false, false, args); err != nil {
			t.Fatalf("redeclare with x-message-ttl %T(1000): %v", v, err)
		}
	}

	const pre = "PRECONDITION_FAILED - inequivalent arg "
	cases := []struct {
		name                string
		durable, autoDelete bool
		args                amqp091.Table
		text                string
	}{
		{"durable", true, false, ttl, pre + "'durable' for queue 'eqq' in vhost '/': received 'true' but current is 'false'"},
		{"auto_delete", false, true, ttl, pre + "'auto_delete' for queue 'eqq' in vhost '/': received 'true' but current is 'false'"},
		{"ttl value", false, false, amqp091.Table{"x-message-ttl": int64(2000)},
			pre + "'x-message-ttl' for queue 'eqq' in vhost '/': received '2000' but current is '1000'"},
		{"ttl missing", false, false, nil,
			pre + "'x-message-ttl' for queue 'eqq' in vhost '/': received none but current is the value '1000' of type 'signedint'"},
		{"ttl type", false, false, amqp091.Table{"x-message-ttl": "1000"},
			pre + "'x-message-ttl' for queue 'eqq' in vhost '/': received the value '1000' of type 'longstr' but current is the value '1000' of type 'signedint'"},
		{"max-length added", false, false, amqp091.Table{"x-message-ttl": int32(1000), "x-max-length": int32(5)},
			pre + "'x-max-length' for queue 'eqq' in vhost '/': received the value '5' of type 'signedint' but current is none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openChannel(t, c).QueueDeclare("eqq", tc.durable, tc.autoDelete, false, false, tc.args)
			wantError(t, err, amqp091.PreconditionFailed, tc.text)
		})
	}

	_, err := openChannel(t, c).QueueDeclarePassive("missing", false, false, false, false, nil)
	wantError(t, err, amqp091.NotFound, "NOT_FOUND - no queue 'missing' in vhost '/'")
}

func TestQueueBindUnbind(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "bq")

	// Unbinding what was never bound is fine.
	if err := ch.QueueUnbind("bq", "never", "amq.direct", nil); err != nil {
		t.Fatalf("unbind of a missing binding: %v", err)
	}
	// Binding twice is one binding.
	for range 2 {
		if err := ch.QueueBind("bq", "k", "amq.direct", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	checkRoutes(t, ch, "amq.direct", []string{"bq"}, map[string][]string{"k": {"bq"}})
	// Bindings are told apart by their arguments too.
	if err := ch.QueueUnbind("bq", "k", "amq.direct", amqp091.Table{"x": "y"}); err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, ch, "amq.direct", []string{"bq"}, map[string][]string{"k": {"bq"}})
	if err := ch.QueueUnbind("bq", "k", "amq.direct", nil); err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, ch, "amq.direct", []string{"bq"}, map[string][]string{"k": nil})

	for name, tc := range map[string]struct {
		op   func(*amqp091.Channel) error
		code int
		text string
	}{
		"missing exchange": {func(ch *amqp091.Channel) error { return ch.QueueBind("bq", "k", "nope", false, nil) },
			amqp091.NotFound, "NOT_FOUND - no exchange 'nope' in vhost '/'"},
		"missing queue": {func(ch *amqp091.Channel) error { return ch.QueueBind("nope", "k", "amq.direct", false, nil) },
			amqp091.NotFound, "NOT_FOUND - no queue 'nope' in vhost '/'"},
		"unbind missing queue": {func(ch *amqp091.Channel) error { return ch.QueueUnbind("nope", "k", "amq.direct", nil) },
			amqp091.NotFound, "NOT_FOUND - no queue 'nope' in vhost '/'"},
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, tc.op(openChannel(t, c)), tc.code, tc.text)
		})
	}
}

func TestQueuePurgeAndDelete(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	declareQueue(t, ch, "pd")
	for range 3 {
		publishBody(t, ch, "", "pd", "m")
	}
	if n, err := ch.QueuePurge("pd", false); err != nil || n != 3 {
		t.Fatalf("purge = %d, %v; want 3", n, err)
	}
	if n, err := ch.QueuePurge("pd", false); err != nil || n != 0 {
		t.Fatalf("second purge = %d, %v; want 0", n, err)
	}

	// if-empty refuses while messages are ready.
	publishBody(t, ch, "", "pd", "m")
	publishBody(t, ch, "", "pd", "m")
	_, err := openChannel(t, c).QueueDelete("pd", false, true, false)
	wantError(t, err, amqp091.PreconditionFailed, "PRECONDITION_FAILED - queue 'pd' in vhost '/' not empty")

	// if-unused refuses while a consumer is attached.
	cch := openChannel(t, c)
	if _, err := cch.Consume("pd", "holder", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, err = openChannel(t, c).QueueDelete("pd", true, false, false)
	wantError(t, err, amqp091.PreconditionFailed, "PRECONDITION_FAILED - queue 'pd' in vhost '/' in use")
	if err := cch.Cancel("holder", false); err != nil {
		t.Fatal(err)
	}
	if err := cch.Close(); err != nil { // requeues the two deliveries
		t.Fatal(err)
	}

	// Now unused, it deletes and reports what it held.
	if n, err := ch.QueueDelete("pd", true, false, false); err != nil || n != 2 {
		t.Fatalf("delete = %d, %v; want 2", n, err)
	}
	if queueExists(t, c, "pd") {
		t.Fatal("queue still exists")
	}
	// Deleting a missing queue succeeds with 0.
	if n, err := ch.QueueDelete("pd", true, true, false); err != nil || n != 0 {
		t.Fatalf("delete of a missing queue = %d, %v; want 0", n, err)
	}
}

func TestExclusiveQueue(t *testing.T) {
	n := startNode(t)
	owner := n.dial(t)
	och := openChannel(t, owner)
	if _, err := och.QueueDeclare("mine", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	publishBody(t, och, "", "mine", "x")
	if _, err := och.QueueDeclare("mine", false, false, true, false, nil); err != nil {
		t.Fatalf("owner redeclares: %v", err)
	}

	other := n.dial(t)
	const locked = "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'mine' in vhost '/'. " +
		"It could be originally declared on another connection or the exclusive property value does not match that of the original declaration."
	for name, op := range map[string]func(*amqp091.Channel) error{
		"declare": func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("mine", false, false, true, false, nil)
			return err
		},
		"declare non-exclusive": func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("mine", false, false, false, false, nil)
			return err
		},
		"passive": func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("mine", false, false, true, false, nil)
			return err
		},
		"consume": func(ch *amqp091.Channel) error {
			_, err := ch.Consume("mine", "", false, false, false, false, nil)
			return err
		},
		"get":    func(ch *amqp091.Channel) error { _, _, err := ch.Get("mine", false); return err },
		"purge":  func(ch *amqp091.Channel) error { _, err := ch.QueuePurge("mine", false); return err },
		"delete": func(ch *amqp091.Channel) error { _, err := ch.QueueDelete("mine", false, false, false); return err },
		"bind":   func(ch *amqp091.Channel) error { return ch.QueueBind("mine", "k", "amq.direct", false, nil) },
		"unbind": func(ch *amqp091.Channel) error { return ch.QueueUnbind("mine", "k", "amq.direct", nil) },
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, op(openChannel(t, other)), amqp091.ResourceLocked, locked)
		})
	}
	// The owner redeclaring without exclusive is refused too, and
	// exclusivity is checked before durable.
	_, err := openChannel(t, owner).QueueDeclare("mine", true, false, false, false, nil)
	wantError(t, err, amqp091.ResourceLocked, locked)
	// An exclusive queue is transient whatever durable said, so durable
	// does not make redeclarations inequivalent.
	if _, err := och.QueueDeclare("mine.durable", true, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := och.QueueDeclare("mine.durable", false, false, true, false, nil); err != nil {
		t.Fatalf("redeclare exclusive queue with durable=false: %v", err)
	}

	// Others may still publish to it.
	pub := openChannel(t, other)
	publishBody(t, pub, "", "mine", "y")
	barrier(t, pub)
	if got := drainQueue(t, och, "mine"); len(got) != 2 {
		t.Fatalf("owner got %q, want two messages", got)
	}

	// Closing the owning connection deletes it.
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the exclusive queue gone with its connection",
		func() bool { return !queueExists(t, other, "mine") })
	// The name is free again.
	declareQueue(t, openChannel(t, other), "mine")
}

func TestAutoDeleteQueue(t *testing.T) {
	n := startNode(t)
	c := n.dial(t)
	ch := openChannel(t, c)
	if _, err := ch.QueueDeclare("ad", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Without ever having had a consumer it stays.
	publishBody(t, ch, "", "ad", "x")
	if _, _, err := ch.Get("ad", true); err != nil {
		t.Fatal(err)
	}
	if !queueExists(t, c, "ad") {
		t.Fatal("auto-delete queue removed before any consumer came")
	}

	if _, err := ch.Consume("ad", "c1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("ad", "c2", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Cancel("c1", false); err != nil {
		t.Fatal(err)
	}
	if !queueExists(t, c, "ad") {
		t.Fatal("auto-delete queue removed while a consumer remained")
	}
	if err := ch.Cancel("c2", false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the auto-delete queue gone after its last consumer cancelled",
		func() bool { return !queueExists(t, c, "ad") })

	// Closing the consumer's channel counts as cancelling.
	if _, err := ch.QueueDeclare("ad2", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	cch := openChannel(t, c)
	if _, err := cch.Consume("ad2", "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := cch.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the auto-delete queue gone after its consumer's channel closed",
		func() bool { return !queueExists(t, c, "ad2") })
}
