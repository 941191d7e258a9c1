package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestAccessAgainstRealCluster manages users, vhosts and permissions with
// warrenctl through one node of three and uses them from real clients on
// the others: a new user in a new vhost publishes to a quorum queue;
// listings show them; a changed password, cleared permissions, a deleted
// user and a deleted vhost each take effect on every node (a deleted
// user's and vhost's connections closed with RabbitMQ's reason, the
// vhost's quorum queue gone with it).
func TestAccessAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	admin := ms[0].InternalAddr().String()
	ctl := ctlAt(t, admin)
	refused := func(wantErr string, args ...string) {
		t.Helper()
		code, _, errOut := warrenctl(t, append([]string{"--node", admin}, args...)...)
		if code != 1 || !strings.Contains(errOut, wantErr) {
			t.Fatalf("warrenctl %s: exit %d, %q; want exit 1 with %q", strings.Join(args, " "), code, errOut, wantErr)
		}
	}
	dial := func(m *nodetest.Member, user, pass, vhost string) (*amqp091.Connection, error) {
		return amqp091.Dial(fmt.Sprintf("amqp://%s:%s@%s/%s", user, pass, m.AMQPAddr(), vhost))
	}

	ctl("add", "vhost", "orders")
	ctl("add", "user", "alice", "s3cret", "--tags", "monitoring")
	refused("user_already_exists: alice", "add", "user", "alice", "other")
	refused("vhost_already_exists: orders", "add", "vhost", "orders")
	refused("no_such_vhost: nowhere", "set", "permissions", "alice", ".*", ".*", ".*", "--vhost", "nowhere")
	refused("permission pattern", "set", "permissions", "alice", "(", ".*", ".*", "--vhost", "orders")

	// Before any permission, alice may not open the vhost (on any node).
	testwait.For(t, 10*time.Second, "warren-1 to know alice", func() bool {
		_, err := dial(ms[1], "alice", "s3cret", "orders")
		var ae *amqp091.Error
		return errors.As(err, &ae) && ae.Code == amqp091.NotAllowed
	})
	// Publishing through the default exchange needs write on amq.default.
	ctl("set", "permissions", "alice", "^orders", ".*", "^orders", "--vhost", "orders")

	var conn *amqp091.Connection
	testwait.For(t, 10*time.Second, "alice to open vhost orders on warren-1", func() bool {
		c, err := dial(ms[1], "alice", "s3cret", "orders")
		if err != nil {
			return false
		}
		conn = c
		return true
	})
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("orders.q", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm("", "orders.q", false, false, amqp091.Publishing{Body: []byte("one")})
	if err != nil || !dc.Wait() {
		t.Fatalf("publish as alice: %v", err)
	}
	// Outside its patterns alice is refused, on the channel.
	if _, err := ch.QueueDeclare("billing", true, false, false, false, nil); err == nil || !strings.Contains(err.Error(), "ACCESS_REFUSED") {
		t.Fatalf("declare outside alice's patterns: %v", err)
	}

	var users usersReport
	json.Unmarshal([]byte(ctl("--json", "list", "users")), &users)
	if !strings.Contains(fmt.Sprint(users.Users), "{alice [monitoring]}") || !strings.Contains(fmt.Sprint(users.Users), "{guest [administrator]}") {
		t.Fatalf("list users: %+v", users)
	}
	if out := columns(ctl("list", "vhosts")); !strings.Contains(out, "orders | quorum\n") || !strings.Contains(out, "/ | quorum\n") {
		t.Fatalf("list vhosts:\n%s", out)
	}
	if out := columns(ctl("list", "permissions", "--vhost", "orders")); !strings.Contains(out, "orders | alice | '^orders' | '.*' | '^orders'\n") {
		t.Fatalf("list permissions:\n%s", out)
	}
	ctl("set", "user-tags", "alice", "monitoring,management")
	json.Unmarshal([]byte(ctl("--json", "list", "users")), &users)
	if !strings.Contains(fmt.Sprint(users.Users), "{alice [monitoring management]}") {
		t.Fatalf("after set user-tags: %+v", users)
	}

	// A new password: the old one no longer logs in, anywhere.
	ctl("change", "password", "alice", "n3w")
	testwait.For(t, 10*time.Second, "the new password on warren-2", func() bool {
		c, err := dial(ms[2], "alice", "n3w", "orders")
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	if c, err := dial(ms[2], "alice", "s3cret", "orders"); err == nil {
		c.Close()
		t.Fatal("the old password still logs in")
	}

	// Cleared permissions: the open connection is refused its next
	// operation; a new one cannot open the vhost.
	ctl("clear", "permissions", "alice", "--vhost", "orders")
	refused("no_such_permissions", "clear", "permissions", "alice", "--vhost", "orders")
	testwait.For(t, 10*time.Second, "warren-1 to refuse alice's declare", func() bool {
		c, err := conn.Channel()
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = c.QueueDeclarePassive("orders.q", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
		return err != nil && strings.Contains(err.Error(), "ACCESS_REFUSED")
	})
	ctl("set", "permissions", "alice", ".*", ".*", ".*", "--vhost", "orders")

	// Deleting the user closes its connection on warren-1.
	ctl("delete", "user", "alice")
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp091.ConnectionForced || !strings.Contains(e.Reason, "user 'alice' is deleted") {
			t.Fatalf("alice's connection closed with %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a deleted user's connection stayed open")
	}
	if out := ctl("list", "permissions", "--user", "alice"); strings.Contains(out, "alice") {
		t.Fatalf("a deleted user's permissions stayed:\n%s", out)
	}
	refused("no_such_user: alice", "delete", "user", "alice")

	// Deleting the vhost: guest's connection to it on warren-2 closes,
	// the quorum queue goes from every member.
	ctl("set", "permissions", "guest", ".*", ".*", ".*", "--vhost", "orders")
	var gconn *amqp091.Connection
	testwait.For(t, 10*time.Second, "guest to open vhost orders on warren-2", func() bool {
		c, err := dial(ms[2], "guest", "guest", "orders")
		gconn = c
		return err == nil
	})
	defer gconn.Close()
	gclosed := gconn.NotifyClose(make(chan *amqp091.Error, 1))
	rec, ok := ms[0].Broker().QueueRecord("orders", "orders.q")
	if !ok || len(rec.Members) != 3 {
		t.Fatalf("queue record %+v, %v", rec, ok)
	}
	ctl("delete", "vhost", "orders")
	select {
	case e := <-gclosed:
		if e == nil || e.Code != amqp091.ConnectionForced || !strings.Contains(e.Reason, "vhost 'orders' is deleted") {
			t.Fatalf("the vhost's connection closed with %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a deleted vhost's connection stayed open")
	}
	testwait.For(t, 15*time.Second, "every node to drop the vhost and its queue's replicas", func() bool {
		for _, m := range ms {
			if len(m.Broker().Queues("orders")) != 0 || hasReplica(t, m, rec.ID) {
				return false
			}
		}
		return true
	})
	if out := columns(ctl("list", "vhosts")); strings.Contains(out, "orders") {
		t.Fatalf("list vhosts after delete:\n%s", out)
	}
	refused("no_such_vhost: orders", "delete", "vhost", "orders")
	if _, err := dial(ms[1], "guest", "guest", "orders"); err == nil {
		t.Fatal("a deleted vhost opens")
	}
}

// hasReplica asks node m (admin MemberStatus) whether it holds a replica
// of group queueID.
func hasReplica(t *testing.T, m *nodetest.Member, queueID string) bool {
	t.Helper()
	conn, err := grpc.NewClient(m.InternalAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = adminpb.NewAdminClient(conn).MemberStatus(ctx, &adminpb.MemberStatusRequest{QueueId: queueID})
	if status.Code(err) == codes.NotFound {
		return false
	}
	if err != nil {
		t.Fatalf("member status on %s: %v", m.Name(), err)
	}
	return true
}
