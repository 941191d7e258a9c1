package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestDirectReplyToAcrossNodes: a requester on one node, a responder on
// another (as a load balancer in front of a cluster spreads them), RPC by
// direct reply-to as Spring AMQP's RabbitTemplate does it by default. The
// reply, published on the responder's node, reaches the requester's reply
// consumer and is confirmed; the reply name answers a passive declare
// from the responder's node; a transactional reply goes at commit; once
// the requester has gone, a mandatory reply is dropped, not returned (the
// reply name of a running node routes, as in RabbitMQ 4.2 and later), and
// the name is not found; once the requester's node has stopped, its reply
// names are unroutable (312 NO_ROUTE).
func TestDirectReplyToAcrossNodes(t *testing.T) {
	t.Parallel()
	ms := nodetest.StartCluster(t, 3)
	ctx := context.Background()

	srv := ms[2].Channel()
	if _, err := srv.QueueDeclare("rpc", true, false, false, false, quorum); err != nil {
		t.Fatal(err)
	}
	requests, err := srv.Consume("rpc", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}

	req := ms[0].Channel()
	replies, err := req.Consume("amq.rabbitmq.reply-to", "rc", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := req.PublishWithContext(ctx, "", "rpc", false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: "c1", Body: []byte("ping")}); err != nil {
		t.Fatal(err)
	}
	var r amqp091.Delivery
	select {
	case r = <-requests:
	case <-time.After(10 * time.Second):
		t.Fatal("no request")
	}
	if !strings.HasPrefix(r.ReplyTo, "amq.rabbitmq.reply-to.") {
		t.Fatalf("reply_to not rewritten: %q", r.ReplyTo)
	}

	check := ms[2].Channel()
	if q, err := check.QueueDeclarePassive(r.ReplyTo, false, false, false, false, nil); err != nil || q.Consumers != 1 {
		t.Fatalf("passive declare of the reply name on the responder's node: %+v %v", q, err)
	}
	if err := srv.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := srv.NotifyPublish(make(chan amqp091.Confirmation, 4))
	returns := srv.NotifyReturn(make(chan amqp091.Return, 4))
	if err := srv.PublishWithContext(ctx, "", r.ReplyTo, true, false, amqp091.Publishing{CorrelationId: r.CorrelationId, Body: []byte("pong")}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-replies:
		if string(m.Body) != "pong" || m.CorrelationId != "c1" || m.RoutingKey != r.ReplyTo || m.ConsumerTag != "rc" {
			t.Fatalf("reply %q, correlation %q, key %q, tag %q", m.Body, m.CorrelationId, m.RoutingKey, m.ConsumerTag)
		}
	case ret := <-returns:
		t.Fatalf("reply returned: %d %s", ret.ReplyCode, ret.ReplyText)
	case <-time.After(5 * time.Second):
		t.Fatal("no reply through the other node")
	}
	if c := <-confirms; !c.Ack {
		t.Fatal("reply nacked")
	}

	// A transactional responder's reply goes at commit.
	txc := ms[1].Channel()
	if err := txc.Tx(); err != nil {
		t.Fatal(err)
	}
	if err := txc.PublishWithContext(ctx, "", r.ReplyTo, false, false, amqp091.Publishing{Body: []byte("tx")}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-replies:
		t.Fatalf("reply %q before the commit", m.Body)
	case <-time.After(200 * time.Millisecond):
	}
	if err := txc.TxCommit(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-replies:
		if string(m.Body) != "tx" {
			t.Fatalf("reply %q", m.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no transactional reply after the commit")
	}

	// The requester goes: a mandatory reply is confirmed and dropped,
	// the name is gone.
	if err := req.Cancel("rc", false); err != nil {
		t.Fatal(err)
	}
	lateReply := func() (returned bool) {
		t.Helper()
		if err := srv.PublishWithContext(ctx, "", r.ReplyTo, true, false, amqp091.Publishing{Body: []byte("late")}); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatal("a reply to a gone requester nacked")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no confirm of a reply to a gone requester")
		}
		select { // a return comes before its publish's confirm
		case ret := <-returns:
			if ret.ReplyCode != 312 {
				t.Fatalf("return code %d", ret.ReplyCode)
			}
			return true
		default:
			return false
		}
	}
	if lateReply() {
		t.Fatal("a mandatory reply to a gone requester of a running node returned")
	}
	select {
	case m, ok := <-replies:
		if ok {
			t.Fatalf("reply %q after the cancel", m.Body)
		}
	default:
	}
	_, err = check.QueueDeclarePassive(r.ReplyTo, false, false, false, false, nil)
	if e, ok := err.(*amqp091.Error); !ok || e.Code != 404 {
		t.Fatalf("passive declare of a gone requester's reply name: %v", err)
	}
	// The requester's node stops: its reply names no longer route.
	ms[0].Stop()
	testwait.For(t, 20*time.Second, "a reply to a stopped node's requester returned", lateReply)
}
