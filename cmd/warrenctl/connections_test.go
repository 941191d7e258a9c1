package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/warrenmq/warren/amqp/server"
	"github.com/warrenmq/warren/amqp/wire"
	"github.com/warrenmq/warren/cluster/admin"
	"github.com/warrenmq/warren/cluster/rpc"
	"github.com/warrenmq/warren/membership"
)

// Connections: each fixed node has one client, named after the node.
func (n *fixedNode) Connections() []server.ConnectionInfo {
	return []server.ConnectionInfo{{
		Name: "10.0.0.9:40000 -> " + n.name, User: "guest", Vhost: "/", ClientName: "app-on-" + n.name,
		ConnectedAt: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC), Blocked: n.name == "warren-1",
		Channels: []server.ChannelInfo{{Number: 1, Confirm: true, Unconfirmed: 2, Unacked: 3, Prefetch: 10,
			Consumers: []server.ConsumerInfo{{Queue: "orders", Tag: "ctag-" + n.name, AckRequired: true, Prefetch: 10,
				Arguments: wire.Table{"x-priority": int32(1)}}}}},
	}}
}

// allAlive is a fixed node whose gossip sees every node alive, warren-2
// (a closed port) too.
type allAlive struct{ *fixedNode }

func (a allAlive) Nodes() []admin.NodeInfo {
	ns := a.fixedNode.Nodes()
	for i := range ns {
		ns[i].State = membership.Alive
	}
	return ns
}

// An alive node that cannot be asked makes the listing incomplete: the
// others' clients are listed, the node named, and the exit status is 1.
func TestListClientsIncomplete(t *testing.T) {
	addrs := startCluster(t) // warren-0 and warren-1 serve, warren-2 is closed
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pool := rpc.NewPool()
	g := grpc.NewServer(rpc.ServerOptions()...)
	admin.NewServer(allAlive{&fixedNode{name: "warren-0", addrs: addrs}}, pool, nil).Register(g)
	go g.Serve(ln)
	t.Cleanup(func() { g.Stop(); pool.Close() })
	node := ln.Addr().String()

	code, out, _ := warrenctl(t, "--node", node, "list", "connections")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{
		"warren-0 | 10.0.0.9:40000 -> warren-0 | guest | / | 1 | app-on-warren-0 | running | ",
		"warren-1 | 10.0.0.9:40000 -> warren-1 | guest | / | 1 | app-on-warren-1 | blocked | ",
		"2026-12-04T10:00:00Z",
		"Incomplete: not every node could be asked.\nwarren-2: ",
	} {
		if !strings.Contains(columns(out), want) {
			t.Errorf("list connections: no %q in\n%s", want, out)
		}
	}

	code, out, _ = warrenctl(t, "--node", node, "--json", "list", "channels")
	var r struct {
		Channels []struct {
			Node        string
			Mode        string
			Unacked     int `json:"messages_unacknowledged"`
			Unconfirmed int `json:"messages_unconfirmed"`
		}
		Unreachable []struct{ Node, Error string }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if code != 1 || len(r.Channels) != 2 || r.Channels[0].Node != "warren-0" || r.Channels[0].Mode != "confirm" ||
		r.Channels[0].Unacked != 3 || r.Channels[0].Unconfirmed != 2 {
		t.Errorf("list channels --json: exit %d:\n%s", code, out)
	}
	if len(r.Unreachable) != 1 || r.Unreachable[0].Node != "warren-2" || r.Unreachable[0].Error == "" {
		t.Errorf("unreachable: %+v", r.Unreachable)
	}

	// Filtering by vhost happens on every node.
	code, out, _ = warrenctl(t, "--node", node, "list", "consumers", "--vhost", "billing")
	if code != 1 || !strings.HasPrefix(out, "No consumers in vhost 'billing'.\n") {
		t.Errorf("list consumers --vhost billing: exit %d:\n%s", code, out)
	}
}
