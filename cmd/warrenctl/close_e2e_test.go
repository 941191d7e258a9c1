package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestCloseConnectionsAgainstRealCluster: close connection closes one
// client's connection on whichever node it is, with 320 and the reason;
// close connections closes those of a user (within a limit) and those of
// a node; the others stay open.
func TestCloseConnectionsAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	admin := ms[0].InternalAddr().String()
	ctl := func(args ...string) (int, string, string) {
		t.Helper()
		return warrenctl(t, append([]string{"--node", admin}, args...)...)
	}
	if code, _, errOut := ctl("add", "user", "app", "secret"); code != 0 {
		t.Fatal(errOut)
	}
	if code, _, errOut := ctl("set", "permissions", "app", ".*", ".*", ".*"); code != 0 {
		t.Fatal(errOut)
	}

	type client struct {
		conn   *amqp091.Connection
		closed chan *amqp091.Error
	}
	dial := func(m *nodetest.Member, user, pass string) *client {
		t.Helper()
		var c *amqp091.Connection
		testwait.For(t, 10*time.Second, user+" to connect to "+m.Name(), func() bool {
			var err error
			c, err = amqp091.Dial(fmt.Sprintf("amqp://%s:%s@%s/", user, pass, m.AMQPAddr()))
			return err == nil
		})
		t.Cleanup(func() { c.Close() })
		return &client{conn: c, closed: c.NotifyClose(make(chan *amqp091.Error, 1))}
	}
	g0, g1 := dial(ms[0], "guest", "guest"), dial(ms[1], "guest", "guest")
	a1, a2 := dial(ms[1], "app", "secret"), dial(ms[2], "app", "secret")
	forced := func(c *client, who, reason string) {
		t.Helper()
		select {
		case e := <-c.closed:
			if e == nil || e.Code != amqp091.ConnectionForced || e.Reason != "CONNECTION_FORCED - "+reason {
				t.Fatalf("%s closed with %v", who, e)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s was not closed", who)
		}
	}
	open := func(c *client, who string) {
		t.Helper()
		if c.conn.IsClosed() {
			t.Fatalf("%s was closed", who)
		}
	}

	// g0 by its name, as list connections shows it.
	code, out, errOut := ctl("--json", "list", "connections")
	var listed struct {
		Connections []struct{ Node, Name, User string }
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil {
		t.Fatalf("list connections: exit %d: %v %s", code, err, errOut)
	}
	i := slices.IndexFunc(listed.Connections, func(c struct{ Node, Name, User string }) bool {
		return c.Node == ms[0].Name() && c.User == "guest"
	})
	if i < 0 || len(listed.Connections) != 4 {
		t.Fatalf("list connections: %s", out)
	}
	name := listed.Connections[i].Name
	if code, out, errOut = ctl("close", "connection", name, "moving you elsewhere"); code != 0 || !strings.Contains(out, "Closed 1 connection(s).") {
		t.Fatalf("close connection: exit %d: %s%s", code, out, errOut)
	}
	forced(g0, "g0", "moving you elsewhere")
	open(g1, "g1")
	if code, out, _ = ctl("close", "connection", name, "again"); code != 1 || !strings.Contains(out, "No connection named") {
		t.Errorf("closing it again: exit %d: %s", code, out)
	}

	// One of app's two, then warren-1's.
	if code, out, errOut = ctl("close", "connections", "bye", "--user", "app", "--limit", "1"); code != 0 || !strings.Contains(out, "Closed 1 connection(s).") {
		t.Fatalf("close connections --user app --limit 1: exit %d: %s%s", code, out, errOut)
	}
	forced(a1, "a1", "bye") // warren-1 is asked before warren-2
	open(a2, "a2")
	if code, out, errOut = ctl("close", "connections", "node maintenance", "--on", ms[1].Name()); code != 0 {
		t.Fatalf("close connections --on: exit %d: %s%s", code, out, errOut)
	}
	forced(g1, "g1", "node maintenance")
	open(a2, "a2")
	if code, _, errOut = ctl("close", "connections", "x", "--on", "warren-9"); code != 1 || !strings.Contains(errOut, "not an alive cluster member") {
		t.Errorf("an unknown node: exit %d: %s", code, errOut)
	}
	t.Logf("\n%s", out)
}
