package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestClientsAgainstRealCluster lists, through a third node, the clients
// of two others: a publisher in confirm mode on warren-0 and a consumer
// on warren-1 holding its whole prefetch of a quorum queue unacknowledged.
func TestClientsAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	pubConn, err := amqp091.DialConfig(fmt.Sprintf("amqp://guest:guest@%s/", ms[0].AMQPAddr()),
		amqp091.Config{Properties: amqp091.Table{"connection_name": "orders-publisher", "product": "e2e"}})
	if err != nil {
		t.Fatal(err)
	}
	defer pubConn.Close()
	pub, err := pubConn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.QueueDeclare("orders", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		dc, err := pub.PublishWithDeferredConfirm("", "orders", false, false, amqp091.Publishing{Body: []byte("x")})
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
	sub := ms[1].Channel()
	if err := sub.Qos(4, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := sub.Consume("orders", "orders-worker", false, false, false, false, amqp091.Table{"x-priority": int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		<-deliveries
	}
	node := ms[2].InternalAddr().String()

	var channels struct {
		Channels []struct {
			Node, Connection, Mode, User, Vhost string
			Unacked                             uint32 `json:"messages_unacknowledged"`
			Prefetch                            uint32 `json:"prefetch_count"`
			Consumers                           int
		}
		Unreachable []any
	}
	testwait.For(t, 10*time.Second, "list channels to show the consumer's 4 unacked", func() bool {
		code, out, errOut := warrenctl(t, "--node", node, "--json", "list", "channels")
		if code != 0 {
			t.Fatalf("list channels: exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &channels); err != nil {
			t.Fatal(err)
		}
		for _, ch := range channels.Channels {
			if ch.Node == ms[1].Name() && ch.Unacked == 4 {
				return true
			}
		}
		return false
	})
	if len(channels.Channels) != 2 || len(channels.Unreachable) != 0 {
		t.Fatalf("channels: %+v", channels)
	}
	for _, ch := range channels.Channels {
		switch ch.Node {
		case ms[0].Name():
			if ch.Mode != "confirm" || ch.Consumers != 0 || ch.User != "guest" || ch.Vhost != "/" {
				t.Errorf("publisher's channel: %+v", ch)
			}
		case ms[1].Name():
			if ch.Mode != "none" || ch.Consumers != 1 || ch.Prefetch != 4 {
				t.Errorf("consumer's channel: %+v", ch)
			}
		default:
			t.Errorf("a channel on %s, which has no clients: %+v", ch.Node, ch)
		}
	}

	code, out, errOut := warrenctl(t, "--node", node, "list", "connections")
	if code != 0 {
		t.Fatalf("list connections: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "orders-publisher") || strings.Count(columns(out), "guest | / | 1 | ") != 2 {
		t.Errorf("list connections: want orders-publisher and two guest connections of one channel each:\n%s", out)
	}

	code, out, errOut = warrenctl(t, "--node", node, "list", "consumers")
	if code != 0 {
		t.Fatalf("list consumers: exit %d: %s", code, errOut)
	}
	want := fmt.Sprintf("/ | orders | orders-worker | %s | ", ms[1].Name())
	if !strings.Contains(columns(out), want) || !strings.Contains(columns(out), ` | true | 4 | false | 2 | {"x-priority":2}`) {
		t.Errorf("list consumers: want a row beginning %q, ack, prefetch 4, priority 2:\n%s", want, out)
	}

	// Another vhost has no clients.
	code, out, _ = warrenctl(t, "--node", node, "list", "consumers", "--vhost", "other")
	if code != 0 || out != "No consumers in vhost 'other'.\n" {
		t.Errorf("list consumers --vhost other: exit %d:\n%s", code, out)
	}
}
