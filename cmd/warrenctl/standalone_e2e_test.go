package main

import (
	"log/slog"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"strings"
	"testing"

	"github.com/warrenmq/warren/cluster/broker"
	"github.com/warrenmq/warren/cluster/node"
	"github.com/warrenmq/warren/cluster/node/nodetest"
)

// TestStandaloneNode runs warrenctl against a node that is no cluster
// member, serving the admin service on its --admin-addr: users, vhosts,
// queues and status answer as on a cluster of one; membership commands
// say the node is standalone.
func TestStandaloneNode(t *testing.T) {
	n, err := node.Start(node.Config{
		DataDir:   t.TempDir(),
		AMQPAddr:  nodetest.FreeAddr(t),
		AdminAddr: "127.0.0.1:0",
		Log:       slog.New(slog.DiscardHandler),
		Broker:    broker.Config{Seed: broker.DefaultSeed()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(t.Context()) })
	addr := n.AdminAddr().String()

	if code, _, errOut := warrenctl(t, "--node", addr, "add", "user", "ops", "ops-pass"); code != exitOK {
		t.Fatalf("add user: exit %d: %s", code, errOut)
	}
	code, out, errOut := warrenctl(t, "--node", addr, "list", "users")
	if code != exitOK || !strings.Contains(out, "ops") || !strings.Contains(out, "guest") {
		t.Fatalf("list users: exit %d: %s%s", code, out, errOut)
	}
	ch := nodeChannel(t, n)
	if _, err := ch.QueueDeclare("jobs", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = warrenctl(t, "--node", addr, "list", "queues")
	if code != exitOK || !strings.Contains(out, "jobs") {
		t.Fatalf("list queues: exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := warrenctl(t, "--node", addr, "status"); code != exitOK {
		t.Fatalf("status: exit %d: %s%s", code, out, errOut)
	}
	if code, _, errOut := warrenctl(t, "--node", addr, "grow", "somewhere", "all"); code != exitFailure || !strings.Contains(errOut, "standalone") {
		t.Fatalf("grow on a standalone node: exit %d: %s", code, errOut)
	}
}

func nodeChannel(t *testing.T, n *node.Node) *amqp091.Channel {
	t.Helper()
	c, err := amqp091.Dial("amqp://guest:guest@" + n.AMQPAddr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
