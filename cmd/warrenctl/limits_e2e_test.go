package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestVhostLimitsAgainstRealCluster: a vhost's max-connections counts its
// connections on every node (two open on two nodes, the third refused on
// the third node with RabbitMQ's 530), max-queues refuses one queue more
// with 406 whichever node declares it; list vhost-limits shows them and
// clear vhost-limits lifts them everywhere.
func TestVhostLimitsAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	admin := ms[0].InternalAddr().String()
	ctl := ctlAt(t, admin)
	ctl("add", "vhost", "tenant")
	ctl("set", "permissions", "guest", ".*", ".*", ".*", "--vhost", "tenant")
	ctl("set", "vhost-limits", `{"max-connections": 2, "max-queues": 2}`, "--vhost", "tenant")
	if code, _, errOut := warrenctl(t, "--node", admin, "set", "vhost-limits", `{"max-channels": 2}`, "--vhost", "tenant"); code != 1 ||
		!strings.Contains(errOut, "Unrecognised terms [max-channels] in limits") {
		t.Errorf("an unknown limit: exit %d: %s", code, errOut)
	}

	dial := func(m *nodetest.Member) (*amqp091.Connection, error) {
		return amqp091.Dial(fmt.Sprintf("amqp://guest:guest@%s/tenant", m.AMQPAddr()))
	}
	var conns []*amqp091.Connection
	for _, m := range ms[:2] {
		var c *amqp091.Connection
		testwait.For(t, 10*time.Second, "a connection to tenant through "+m.Name(), func() bool {
			var err error
			c, err = dial(m)
			return err == nil
		})
		conns = append(conns, c)
		defer c.Close()
	}
	// Committed through warren-0; the others apply it a moment later.
	testwait.For(t, 10*time.Second, "warren-2 to know the limits", func() bool {
		return ms[2].Broker().VhostLimits("tenant")["max-connections"] == 2
	})
	_, err := dial(ms[2])
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != amqp091.NotAllowed ||
		ae.Reason != "NOT_ALLOWED - access to vhost 'tenant' refused for user 'guest': connection limit (2) is reached" {
		t.Fatalf("a third connection, on a third node: %v", err)
	}

	// Two queues, through two nodes; a third refused through the third.
	for i, m := range []*amqp091.Connection{conns[0], conns[1]} {
		ch, err := m.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDeclare(fmt.Sprintf("q%d", i), true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
	}
	conns[0].Close()
	var third *amqp091.Connection
	testwait.For(t, 10*time.Second, "a connection through warren-2 once one closed", func() bool {
		third, err = dial(ms[2])
		return err == nil
	})
	defer third.Close()
	ch, err := third.Channel()
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "warren-2 to know both queues", func() bool {
		_, ok0 := ms[2].Broker().QueueRecord("tenant", "q0")
		_, ok1 := ms[2].Broker().QueueRecord("tenant", "q1")
		return ok0 && ok1
	})
	_, declared := ch.QueueDeclare("q2", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
	if !errors.As(declared, &ae) || ae.Code != amqp091.PreconditionFailed ||
		ae.Reason != "PRECONDITION_FAILED - cannot declare queue 'q2': queue limit in vhost 'tenant' (2) is reached" {
		t.Fatalf("a third queue: %v", declared)
	}

	var listed struct {
		Limits []struct {
			Vhost  string
			Limits map[string]int64
		}
	}
	if err := json.Unmarshal([]byte(ctl("--json", "list", "vhost-limits", "--global")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.Limits) != 1 || listed.Limits[0].Vhost != "tenant" || listed.Limits[0].Limits["max-queues"] != 2 || listed.Limits[0].Limits["max-connections"] != 2 {
		t.Fatalf("list vhost-limits --global: %+v", listed)
	}

	ctl("clear", "vhost-limits", "--vhost", "tenant")
	if out := ctl("list", "vhost-limits", "--vhost", "tenant"); !strings.Contains(out, "{}") {
		t.Errorf("list vhost-limits after clearing:\n%s", out)
	}
	testwait.For(t, 10*time.Second, "warren-2 to take the limits away", func() bool {
		c, err := dial(ms[2])
		if err != nil {
			return false
		}
		defer c.Close()
		ch, err := c.Channel()
		if err != nil {
			return false
		}
		_, err = ch.QueueDeclare("q2", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
		return err == nil
	})
}

// TestUserLimitsAgainstRealCluster: a user's max-connections counts its
// connections on every node and max-channels its channels on every node
// (one more closes the connection, as in RabbitMQ), each with RabbitMQ's
// 530 text; clear user-limits lifts one at a time.
func TestUserLimitsAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	admin := ms[0].InternalAddr().String()
	ctl := ctlAt(t, admin)
	ctl("add", "user", "app", "secret")
	ctl("set", "permissions", "app", ".*", ".*", ".*")
	ctl("set", "user-limits", "app", `{"max-connections": 2, "max-channels": 2}`)
	testwait.For(t, 10*time.Second, "every node to know the limits", func() bool {
		for _, m := range ms {
			if n, ok := m.Broker().UserLimit("app", "max-channels"); !ok || n != 2 {
				return false
			}
		}
		return true
	})
	dial := func(m *nodetest.Member) (*amqp091.Connection, error) {
		return amqp091.Dial(fmt.Sprintf("amqp://app:secret@%s/", m.AMQPAddr()))
	}
	a, err := dial(ms[0])
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := dial(ms[1])
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var ae *amqp091.Error
	if _, err := dial(ms[2]); !errors.As(err, &ae) || ae.Code != amqp091.NotAllowed ||
		ae.Reason != "NOT_ALLOWED - connection refused for user 'app': user connection limit (2) is reached" {
		t.Fatalf("a third connection of app: %v", err)
	}
	for _, c := range []*amqp091.Connection{a, b} {
		if _, err := c.Channel(); err != nil {
			t.Fatal(err)
		}
	}
	bClosed := b.NotifyClose(make(chan *amqp091.Error, 1))
	if _, err := b.Channel(); err == nil {
		t.Fatal("a third channel of app was opened")
	}
	select {
	case e := <-bClosed:
		if e == nil || e.Code != amqp091.NotAllowed ||
			e.Reason != "NOT_ALLOWED - number of channels opened for user 'app' has reached the maximum allowed user limit of 2" {
			t.Fatalf("the connection closed with %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection that opened a third channel was not closed")
	}

	var listed struct {
		Limits []struct {
			User   string
			Limits map[string]int64
		}
	}
	if err := json.Unmarshal([]byte(ctl("--json", "list", "user-limits", "--global")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.Limits) != 1 || listed.Limits[0].User != "app" || listed.Limits[0].Limits["max-channels"] != 2 {
		t.Fatalf("list user-limits --global: %+v", listed)
	}
	ctl("clear", "user-limits", "app", "max-channels")
	testwait.For(t, 10*time.Second, "warren-0 to lift max-channels", func() bool {
		_, ok := ms[0].Broker().UserLimit("app", "max-channels")
		return !ok
	})
	for range 3 {
		if _, err := a.Channel(); err != nil {
			t.Fatalf("a channel once max-channels was cleared: %v", err)
		}
	}
	if code, _, errOut := warrenctl(t, "--node", admin, "clear", "user-limits", "app", "max-queues"); code != 1 || !strings.Contains(errOut, "no such limit") {
		t.Errorf("clearing an unknown limit: exit %d: %s", code, errOut)
	}
}
