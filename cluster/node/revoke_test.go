package node_test

import (
	"context"
	"github.com/warrenmq/warren/raftq/testwait"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/catalog"
	"github.com/warrenmq/warren/cluster/node/nodetest"
)

// TestRevocationReachesOpenChannelsOnEveryNode: permissions cleared
// through one node refuse the next publish of a channel open on another
// node as soon as that node has applied the change (well within a second
// here), and a deleted user's connections on every node are closed.
func TestRevocationReachesOpenChannelsOnEveryNode(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	if err := ms[0].Broker().AddUser("app", "app-pass", nil); err != nil {
		t.Fatal(err)
	}
	if err := ms[0].Broker().SetPermissions(catalog.Permission{User: "app", Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	dial := func(m *nodetest.Member) *amqp091.Connection {
		t.Helper()
		var c *amqp091.Connection
		testwait.For(t, 10*time.Second, "app to log in on "+m.Name(), func() bool {
			var err error
			c, err = amqp091.Dial("amqp://app:app-pass@" + m.AMQPAddr().String() + "/")
			return err == nil
		})
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1 := dial(ms[1])
	c2 := dial(ms[2])
	ch, err := c1.Channel()
	if err != nil {
		t.Fatal(err)
	}
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	publish := func() error {
		return ch.PublishWithContext(context.Background(), "amq.fanout", "", false, false, amqp091.Publishing{Body: []byte("x")})
	}
	if err := publish(); err != nil {
		t.Fatal(err)
	}
	if err := ms[0].Broker().ClearPermissions("app", "/"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testwait.For(t, 5*time.Second, "the open channel on another node to be refused", func() bool {
		select {
		case e := <-closed:
			if e == nil || e.Code != amqp091.AccessRefused {
				t.Fatalf("channel closed with %v, want 403", e)
			}
			return true
		default:
		}
		publish()
		return false
	})
	t.Logf("refused %v after the change was committed", time.Since(start))

	gone := c2.NotifyClose(make(chan *amqp091.Error, 1))
	if err := ms[0].Broker().DeleteUser("app"); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-gone:
		if e == nil || e.Code != amqp091.ConnectionForced {
			t.Fatalf("connection closed with %v, want 320", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a deleted user's connection on another node stayed open")
	}
}
