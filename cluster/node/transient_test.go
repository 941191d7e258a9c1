package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// Exclusive, auto-delete and transient queues keep their messages on the
// node that declared them, as in RabbitMQ, and every node routes to them.

// TestExclusiveReplyQueueAcrossNodes: the classic RPC pattern with a
// requester and a responder on different nodes. The requester's
// server-named exclusive reply queue receives the reply the responder
// publishes through its own node (mandatory, confirmed); other
// connections, on any node, are refused the queue with 405; once the
// requester's connection closes the queue is gone everywhere, and a
// mandatory reply comes back 312 NO_ROUTE.
func TestExclusiveReplyQueueAcrossNodes(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ctx := context.Background()

	// The responder, connected to another node, serves a durable queue.
	srv := ms[1].Channel()
	if _, err := srv.QueueDeclare("rpc.requests", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	requests, err := srv.Consume("rpc.requests", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := srv.NotifyPublish(make(chan amqp091.Confirmation, 16))
	returns := srv.NotifyReturn(make(chan amqp091.Return, 16))

	reqConn := ms[0].Dial()
	req, err := reqConn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	reply, err := req.QueueDeclare("", false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	replies, err := req.Consume(reply.Name, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := req.PublishWithContext(ctx, "", "rpc.requests", false, false, amqp091.Publishing{ReplyTo: reply.Name, CorrelationId: fmt.Sprint(i), Body: []byte("ping")}); err != nil {
			t.Fatal(err)
		}
		var r amqp091.Delivery
		select {
		case r = <-requests:
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d not delivered", i)
		}
		if err := srv.PublishWithContext(ctx, "", r.ReplyTo, true, false, amqp091.Publishing{CorrelationId: r.CorrelationId, Body: []byte("pong")}); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-replies:
			if m.CorrelationId != fmt.Sprint(i) || string(m.Body) != "pong" {
				t.Fatalf("reply %d: correlation %q body %q", i, m.CorrelationId, m.Body)
			}
			if err := m.Ack(false); err != nil {
				t.Fatal(err)
			}
		case r := <-returns:
			t.Fatalf("reply returned: %d %s", r.ReplyCode, r.ReplyText)
		case <-time.After(10 * time.Second):
			t.Fatalf("reply %d not delivered through another node", i)
		}
		if c := <-confirms; !c.Ack {
			t.Fatalf("reply %d nacked", i)
		}
	}

	// Locked to every other connection, on its node and the others.
	for _, m := range []*nodetest.Member{ms[0], ms[2]} {
		for what, use := range map[string]func(*amqp091.Channel) error{
			"passive declare": func(ch *amqp091.Channel) error {
				_, err := ch.QueueDeclarePassive(reply.Name, false, false, true, false, nil)
				return err
			},
			"consume": func(ch *amqp091.Channel) error {
				_, err := ch.Consume(reply.Name, "", false, false, false, false, nil)
				return err
			},
			"bind": func(ch *amqp091.Channel) error { return ch.QueueBind(reply.Name, "k", "amq.direct", false, nil) },
			"purge": func(ch *amqp091.Channel) error {
				_, err := ch.QueuePurge(reply.Name, false)
				return err
			},
			"delete": func(ch *amqp091.Channel) error {
				_, err := ch.QueueDelete(reply.Name, false, false, false)
				return err
			},
		} {
			if code := amqpCode(use(m.Channel())); code != amqp091.ResourceLocked {
				t.Errorf("%s through %s: code %d, want 405", what, m.Name(), code)
			}
		}
	}

	if err := reqConn.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the exclusive queue gone on every node", func() bool {
		for _, m := range ms {
			_, err := m.Channel().QueueDeclarePassive(reply.Name, false, false, true, false, nil)
			if amqpCode(err) != amqp091.NotFound {
				return false
			}
		}
		return true
	})
	if err := srv.PublishWithContext(ctx, "", reply.Name, true, false, amqp091.Publishing{Body: []byte("late")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-returns:
		if r.ReplyCode != amqp091.NoRoute {
			t.Fatalf("late reply returned with %d", r.ReplyCode)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a reply to a gone queue was not returned")
	}
}

// TestSubscriberQueuesAcrossNodes: pub/sub by per-subscriber exclusive
// queues, bound to a durable topic exchange and to a transient fanout
// exchange declared on the subscriber's node; a publisher connected to
// another node reaches both. A binding to another node's exclusive queue
// is refused; deleting the transient exchange through a third node
// removes it everywhere.
func TestSubscriberQueuesAcrossNodes(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ctx := context.Background()

	sub := ms[0].Channel()
	if err := sub.ExchangeDeclare("events", "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := sub.ExchangeDeclare("news", "fanout", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := sub.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.QueueBind(q.Name, "order.*", "events", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := sub.QueueBind(q.Name, "", "news", false, nil); err != nil {
		t.Fatal(err)
	}
	got, err := sub.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}

	pub := ms[2].Channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 16))
	returns := pub.NotifyReturn(make(chan amqp091.Return, 16))
	sends := []struct{ exchange, key string }{{"events", "order.created"}, {"news", "x"}, {"events", "order.paid"}}
	for i, s := range sends {
		if err := pub.PublishWithContext(ctx, s.exchange, s.key, true, false, amqp091.Publishing{Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		if c := <-confirms; !c.Ack {
			t.Fatalf("publish %d nacked", i)
		}
	}
	for i, s := range sends {
		select {
		case m := <-got:
			if string(m.Body) != fmt.Sprint(i) || m.Exchange != s.exchange || m.RoutingKey != s.key {
				t.Fatalf("delivery %d: %q from %q with %q", i, m.Body, m.Exchange, m.RoutingKey)
			}
		case r := <-returns:
			t.Fatalf("publish to %s returned: %d %s", r.Exchange, r.ReplyCode, r.ReplyText)
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d missing", i)
		}
	}

	// The transient exchange is the same on every node: a redeclaration
	// as durable is inequivalent, and its deletion anywhere is seen by
	// the publisher's node.
	err = ms[1].Channel().ExchangeDeclare("news", "fanout", true, true, false, false, nil)
	if amqpCode(err) != amqp091.PreconditionFailed {
		t.Fatalf("durable redeclaration of a transient exchange through another node: %v", err)
	}
	if err := ms[1].Channel().ExchangeDelete("news", false, false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the transient exchange gone on the publisher's node", func() bool {
		return amqpCode(ms[2].Channel().ExchangeDeclarePassive("news", "fanout", false, true, false, false, nil)) == amqp091.NotFound
	})
}

// TestTransientQueueServedAcrossNodes: a transient auto-delete queue
// declared on one node is listed, counted, consumed and acknowledged through
// another (its consumer's deliveries come from the owner node), its
// unacknowledged deliveries are redelivered when that consumer's channel
// closes, and when its last consumer goes it is deleted on every node.
func TestTransientQueueServedAcrossNodes(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ctx := context.Background()

	owner := ms[0].Channel()
	q, err := owner.QueueDeclare("work.transient", false, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := func(ready uint64) {
		t.Helper()
		for _, m := range ms {
			c := adminClient(t, m)
			var l *adminpb.Queue
			testwait.For(t, 10*time.Second, "the queue listed through "+m.Name(), func() bool {
				list, err := c.ListQueues(callCtx(t, 10*time.Second), &adminpb.ListQueuesRequest{Vhost: "/"})
				if err != nil {
					t.Fatalf("list queues: %v", err)
				}
				for _, lq := range list.Queues {
					if lq.Name == q.Name {
						l = lq
					}
				}
				return l != nil
			})
			if l.Leader != ms[0].Name() || l.Ready != ready || len(l.Members) != 1 || l.Members[0] != ms[0].Name() {
				t.Fatalf("listed through %s: leader %q, members %v, ready %d", m.Name(), l.Leader, l.Members, l.Ready)
			}
		}
	}
	listed(0) // before any node but its own has used it
	pub := ms[2].Channel()
	for i := range 5 {
		if err := pub.PublishWithContext(ctx, "", q.Name, false, false, amqp091.Publishing{Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 10*time.Second, "the count through another node", func() bool {
		st, err := ms[1].Channel().QueueDeclarePassive(q.Name, false, true, false, false, nil)
		return err == nil && st.Messages == 5
	})
	// Every node lists it, on its node, with its node's counts.
	listed(5)

	// A consumer through another node takes two and leaves them unacked.
	first := ms[1].Channel()
	if err := first.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	d1, err := first.Consume(q.Name, "first", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		select {
		case m := <-d1:
			if string(m.Body) != fmt.Sprint(i) {
				t.Fatalf("first consumer got %q", m.Body)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery through another node")
		}
	}

	// A second consumer, on the third node, takes the rest and acks.
	second := ms[2].Channel()
	d2, err := second.Consume(q.Name, "second", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	take := func(n int) {
		for range n {
			select {
			case m := <-d2:
				seen[string(m.Body)] = true
				if err := m.Ack(false); err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("second consumer has %d of 5", len(seen))
			}
		}
	}
	take(3)
	if err := first.Close(); err != nil { // its two come back, redelivered
		t.Fatal(err)
	}
	take(2)
	if len(seen) != 5 {
		t.Fatalf("second consumer saw %v", seen)
	}
	testwait.For(t, 10*time.Second, "every message acknowledged", func() bool {
		st, err := ms[0].Channel().QueueDeclarePassive(q.Name, false, true, false, false, nil)
		return err == nil && st.Messages == 0
	})

	// The last consumer goes: auto-delete removes the queue everywhere.
	if err := second.Cancel("second", false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the auto-delete queue gone on every node", func() bool {
		for _, m := range ms {
			if _, err := m.Channel().QueueDeclarePassive(q.Name, false, true, false, false, nil); amqpCode(err) != amqp091.NotFound {
				return false
			}
		}
		return true
	})
}

// TestTransientQueuesDieWithTheirNode: a node's exclusive and transient
// queues are removed from the others when it fails (after a grace) and
// its transient queue's bindings with them; a node that restarts
// removes those of its earlier start itself. Their names can be declared
// again, on another node.
func TestTransientQueuesDieWithTheirNode(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)

	victim := ms[2].Channel()
	if _, err := victim.QueueDeclare("victim.exclusive", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := victim.ExchangeDeclare("victim.fanout", "fanout", true, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := victim.QueueBind("victim.exclusive", "", "victim.fanout", false, nil); err != nil {
		t.Fatal(err)
	}
	restarted := ms[1].Channel()
	if _, err := restarted.QueueDeclare("restarted.transient", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Its name is locked on every node.
	if _, err := ms[0].Channel().QueueDeclare("victim.exclusive", false, false, true, false, nil); amqpCode(err) != amqp091.ResourceLocked {
		t.Fatalf("declare of another node's exclusive queue: %v", err)
	}
	testwait.For(t, 10*time.Second, "the queues known on the first node", func() bool {
		_, err1 := ms[0].Channel().QueueDeclarePassive("victim.exclusive", false, false, true, false, nil)
		_, err2 := ms[0].Channel().QueueDeclarePassive("restarted.transient", false, false, false, false, nil)
		return amqpCode(err1) == amqp091.ResourceLocked && err2 == nil
	})

	ms[2].Kill()
	ms[1].Kill()
	ms[1].Start() // before the others count it failed
	testwait.For(t, 20*time.Second, "the restarted node's transient queue removed", func() bool {
		_, err := ms[0].Channel().QueueDeclarePassive("restarted.transient", false, false, false, false, nil)
		return amqpCode(err) == amqp091.NotFound
	})
	// On both nodes left: each removes it, and the one whose removal
	// commits first finds the other's has nothing to do.
	testwait.For(t, 40*time.Second, "the failed node's exclusive queue removed", func() bool {
		for _, m := range ms[:2] {
			_, err := m.Channel().QueueDeclarePassive("victim.exclusive", false, false, true, false, nil)
			if amqpCode(err) != amqp091.NotFound {
				return false
			}
		}
		return true
	})
	// Its last binding gone, the auto-delete exchange went with it.
	if err := ms[1].Channel().ExchangeDeclarePassive("victim.fanout", "fanout", true, true, false, false, nil); amqpCode(err) != amqp091.NotFound {
		t.Fatalf("the auto-delete exchange of the failed node's queue: %v", err)
	}
	for _, name := range []string{"victim.exclusive", "restarted.transient"} {
		if _, err := ms[0].Channel().QueueDeclare(name, false, false, true, false, nil); err != nil {
			t.Fatalf("declare %s again: %v", name, err)
		}
	}
}

// TestFailedNodesQueuesRefusedAtOnce: a publish through another node to
// the exclusive queue of a node that has just failed is nacked as soon as
// gossip reports the failure, as RabbitMQ's channel nacks one to a queue
// whose node went down, not once the queue is removed (after a 10 s
// grace) or the publish timeout; a get from its transient queue is
// refused with RabbitMQ's 404 for a queue whose node is down; once the
// queue is removed, a mandatory publish to it comes back unroutable.
func TestFailedNodesQueuesRefusedAtOnce(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	q, err := ms[2].Channel().QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms[2].Channel().QueueDeclare("victim.transient", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ch := ms[0].Channel()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	returns := ch.NotifyReturn(make(chan amqp091.Return, 8))
	publish := func() (acked, returned bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q.Name, true, false, amqp091.Publishing{Body: []byte("reply")})
		if err != nil {
			t.Fatal(err)
		}
		acked, err = dc.WaitContext(ctx)
		if err != nil {
			t.Fatalf("no confirm: %v", err)
		}
		select {
		case <-returns: // a return comes before its publish's confirm
			returned = true
		default:
		}
		return acked, returned
	}
	if acked, returned := publish(); !acked || returned {
		t.Fatalf("publish to the live queue: acked %v, returned %v", acked, returned)
	}

	ms[2].Kill()
	killed := time.Now()
	testwait.For(t, 10*time.Second, "a publish to the failed node's queue nacked", func() bool {
		acked, _ := publish()
		return !acked
	})
	// Before the queue's removal, which waits out a 10 s grace after
	// gossip reports the failure (the test nodes' gossip takes about a
	// second): the nack did not wait for it.
	if d := time.Since(killed); d > 8*time.Second {
		t.Fatalf("the first nack came %v after the kill: it waited for the queue's removal", d)
	}
	// Meanwhile a get is refused as RabbitMQ refuses one from a queue
	// whose node is down.
	_, _, err = ms[0].Channel().Get("victim.transient", false)
	if amqpCode(err) != amqp091.NotFound || !strings.Contains(err.Error(), "home node 'warren-2' of queue 'victim.transient' in vhost '/' is down or inaccessible") {
		t.Fatalf("get from the failed node's queue: %v", err)
	}
	testwait.For(t, 40*time.Second, "the queue removed, a mandatory publish returned", func() bool {
		acked, returned := publish()
		return acked && returned
	})
}

// amqpCode is the reply code of a channel or connection error, 0 if err
// is none.
func amqpCode(err error) int {
	var e *amqp091.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// TestTransientQueueGetPurgeDeleteAcrossNodes: basic.get with its ack and
// its nack, purge and delete of a transient queue, each through another
// node than the one holding it.
func TestTransientQueueGetPurgeDeleteAcrossNodes(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	if _, err := ms[0].Channel().QueueDeclare("kept.transient", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	pub := ms[2].Channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"a", "b", "c"} {
		publishConfirmed(t, pub, "kept.transient", body)
	}

	getter := ms[1].Channel()
	d, ok, err := getter.Get("kept.transient", false)
	if err != nil || !ok || string(d.Body) != "a" || d.MessageCount != 2 {
		t.Fatalf("get through another node: %q ok=%v remaining=%d err=%v", d.Body, ok, d.MessageCount, err)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
	d, ok, err = getter.Get("kept.transient", false)
	if err != nil || !ok || string(d.Body) != "b" {
		t.Fatalf("second get: %q ok=%v err=%v", d.Body, ok, err)
	}
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	d, ok, err = getter.Get("kept.transient", true)
	if err != nil || !ok || string(d.Body) != "b" || !d.Redelivered {
		t.Fatalf("the nacked message again: %q ok=%v redelivered=%v err=%v", d.Body, ok, d.Redelivered, err)
	}

	n, err := ms[2].Channel().QueuePurge("kept.transient", false)
	if err != nil || n != 1 {
		t.Fatalf("purge through another node: %d %v", n, err)
	}
	if _, err := ms[1].Channel().QueueDelete("kept.transient", false, false, false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the queue deleted through another node gone on its own", func() bool {
		_, err := ms[0].Channel().QueueDeclarePassive("kept.transient", false, false, false, false, nil)
		return amqpCode(err) == amqp091.NotFound
	})
}
