package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster/node/nodetest"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestAlarmsAgainstRealCluster raises resource alarms on one node of
// three with warrenctl and checks that they are cluster-wide, as
// RabbitMQ's: a publisher on another node is blocked (connection.blocked
// with RabbitMQ's reason, its publish unconfirmed) while a consumer on the
// third carries on; the checks fail through any node; clearing the alarm
// unblocks the publisher, whose publish is then confirmed and delivered;
// and a node that goes down takes its alarm with it.
func TestAlarmsAgainstRealCluster(t *testing.T) {
	ms := nodetest.StartCluster(t, 3)
	addr := func(i int) string { return ms[i].InternalAddr().String() }

	pubConn := ms[1].Dial()
	blocked := pubConn.NotifyBlocked(make(chan amqp091.Blocking, 8))
	pub, err := pubConn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.QueueDeclare("jobs", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(body string) *amqp091.DeferredConfirmation {
		t.Helper()
		dc, err := pub.PublishWithDeferredConfirm("", "jobs", false, false, amqp091.Publishing{Body: []byte(body)})
		if err != nil {
			t.Fatalf("publish %s: %v", body, err)
		}
		return dc
	}
	if !publish("before").Wait() {
		t.Fatal("publish before any alarm nacked")
	}
	sub := ms[2].Channel()
	deliveries, err := sub.Consume("jobs", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	expectDelivery := func(body string) {
		t.Helper()
		select {
		case d := <-deliveries:
			if string(d.Body) != body {
				t.Fatalf("delivered %q, want %q", d.Body, body)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q not delivered", body)
		}
	}
	expectDelivery("before")

	check := func(node int, args ...string) (int, alarmsReport) {
		t.Helper()
		code, out, errOut := warrenctl(t, append([]string{"--node", addr(node), "--json"}, args...)...)
		var r alarmsReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%s: exit %d, %v in %q (%s)", strings.Join(args, " "), code, err, out, errOut)
		}
		return code, r
	}
	if code, r := check(2, "check", "alarms"); code != 0 || !r.Passed {
		t.Fatalf("check alarms before any: exit %d, %+v", code, r)
	}

	// A disk free limit above the free space puts warren-0's disk alarm on.
	code, r := check(0, "set", "disk-free-limit", "1000000TB")
	if code != 0 || r.DiskFreeLimit != 1e18 || r.DiskFree <= 0 || len(r.Alarms) == 0 || r.Alarms[0] != (alarmReport{Node: "warren-0", Resource: "disk"}) {
		t.Fatalf("set disk-free-limit: exit %d, %+v", code, r)
	}
	testwait.For(t, 10*time.Second, "warren-2 to see warren-0's alarm", func() bool {
		code, r := check(2, "check", "alarms")
		return code == 1 && len(r.Alarms) == 1 && r.Alarms[0] == alarmReport{Node: "warren-0", Resource: "disk"}
	})
	if code, r := check(2, "check", "local-alarms"); code != 0 || !r.Passed {
		t.Fatalf("check local-alarms on warren-2: exit %d, %+v", code, r)
	}
	if code, r := check(0, "check", "local-alarms"); code != 1 || len(r.Alarms) != 1 {
		t.Fatalf("check local-alarms on warren-0: exit %d, %+v", code, r)
	}
	testwait.For(t, 10*time.Second, "cluster status through warren-1 to show warren-0's alarm", func() bool {
		code, out, errOut := warrenctl(t, "--node", addr(1), "cluster", "status")
		if code != 0 {
			t.Fatalf("cluster status: exit %d, %s", code, errOut)
		}
		return strings.Contains(columns(out), "\nwarren-0 | alive | ") && strings.Contains(columns(out), " | disk\nwarren-1 ")
	})
	code, out, _ := warrenctl(t, "--node", addr(2), "list", "alarms")
	for _, want := range []string{"1 resource alarm(s) in effect across the cluster", "warren-0 | disk", "Node warren-2:", "free, limit none"} {
		if code != 0 || !strings.Contains(columns(out), want) {
			t.Fatalf("list alarms: exit %d, lacks %q:\n%s", code, want, out)
		}
	}

	// warren-1's publisher is blocked; warren-2's consumer is not.
	testwait.For(t, 10*time.Second, "warren-1 to block publishers", func() bool {
		reason, _ := ms[1].Broker().Blocking()
		return reason == "low on disk"
	})
	held := publish("during")
	select {
	case b := <-blocked:
		if !b.Active || b.Reason != "low on disk" {
			t.Fatalf("blocking notification %+v", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("publisher on warren-1 was not blocked")
	}
	select {
	case <-held.Done():
		t.Fatal("a publish was confirmed while the cluster was blocked")
	case d := <-deliveries:
		t.Fatalf("%q delivered while the cluster was blocked", d.Body)
	case <-time.After(500 * time.Millisecond):
	}
	if _, _, err := sub.Get("jobs", true); err != nil {
		t.Fatalf("a consumer's channel failed during the alarm: %v", err)
	}

	// Clearing the alarm unblocks the publisher: its publish goes through.
	if code, r := check(0, "set", "disk-free-limit", "50MB"); code != 0 || len(r.Alarms) != 0 || r.DiskFreeLimit != 50e6 {
		t.Fatalf("set disk-free-limit 50MB: exit %d, %+v", code, r)
	}
	select {
	case b := <-blocked:
		if b.Active {
			t.Fatalf("second notification %+v, want unblocked", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("publisher on warren-1 was not unblocked")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ok, err := held.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("the held publish: ack %v, %v", ok, err)
	}
	expectDelivery("during")

	// A memory alarm, from a watermark under what warren-2 uses, blocks
	// as well, with its own reason; the report shows the node's memory
	// and, part of it, its classic queue's message.
	local := ms[2].Channel()
	if _, err := local.QueueDeclare("scratch", false, false, true, false, amqp091.Table{"x-queue-type": "classic"}); err != nil {
		t.Fatal(err)
	}
	if err := local.PublishWithContext(ctx, "", "scratch", false, false, amqp091.Publishing{Body: []byte("held in memory")}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the classic queue to hold its message", func() bool { return ms[2].Broker().MemoryHeld() > 0 })
	if code, r := check(2, "set", "memory-high-watermark", "1"); code != 0 || len(r.Alarms) != 1 || r.Alarms[0] != (alarmReport{Node: "warren-2", Resource: "memory"}) || r.MemoryLimit != 1 ||
		r.MemoryHeld != int64(len("held in memory")) || r.MemoryUsed < 1<<20 {
		t.Fatalf("set memory-high-watermark 1: exit %d, %+v", code, r)
	}
	testwait.For(t, 10*time.Second, "warren-1 to block for warren-2's memory", func() bool {
		reason, _ := ms[1].Broker().Blocking()
		return reason == "low on memory"
	})
	if code, r := check(2, "set", "memory-high-watermark", "0.4"); code != 0 || len(r.Alarms) != 0 {
		t.Fatalf("set memory-high-watermark 0.4: exit %d, %+v", code, r)
	}

	// A value that does not read is refused with the reason.
	code, _, errOut := warrenctl(t, "--node", addr(0), "set", "disk-free-limit", "lots")
	if code != 1 || !strings.Contains(errOut, "disk free limit is an amount") {
		t.Fatalf("set disk-free-limit lots: exit %d, %s", code, errOut)
	}

	// A node that goes down blocks nobody.
	if code, _ := check(0, "set", "disk-free-limit", "1000000TB"); code != 0 {
		t.Fatalf("raise again: exit %d", code)
	}
	testwait.For(t, 10*time.Second, "warren-2 to see the alarm again", func() bool {
		code, _ := check(2, "check", "alarms")
		return code == 1
	})
	ms[0].Kill()
	testwait.For(t, 15*time.Second, "warren-0's alarm to go with it", func() bool {
		code, r := check(2, "check", "alarms")
		reason, _ := ms[1].Broker().Blocking()
		t.Logf("check alarms on warren-2: %d %+v; warren-1 blocking %q", code, r.Alarms, reason)
		return code == 0 && reason == ""
	})
}
