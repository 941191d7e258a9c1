package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestClusterRestartedFollowerCatchesUp: a node stopped for 21 s while
// eight quorum queues take publishes holds every committed entry of all
// eight within 3 s of taking logins again (the peer connection's own
// reconnect backoff is up to 2 s). hashicorp/raft's leader
// backs off after each failed AppendEntries, up to about ten seconds a
// try once ten seconds of them have failed; when the transport failed
// fast while the node was down, each queue's next try came up to ten
// seconds after the restart (the slowest of the eight 2.3 and 4.9 s
// after logins in two runs), and a rebalance or transfer to the node
// waited as long. The transport now waits for the peer instead
// (SetPeerWait): 6 ms to 1.6 s in eleven runs, mostly under 100 ms.
func TestClusterRestartedFollowerCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster process test")
	}
	c := startProcCluster(t, 3, clusterOpts{})
	const queues = 8
	names := make([]string, queues)
	for i := range names {
		names[i] = fmt.Sprintf("back%d", i)
		declareQuorum(t, c.nodes[0], names[i])
	}
	follower := c.nodes[2] // leads some queues until it stops (and hands them off)
	admin := adminClient(t, c.nodes[0])
	// lag is how many committed entries of queue the follower's replica
	// lacks (none when it leads), -1 while that is unknown (no leader
	// answered, the node is down).
	lag := func(queue string) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := admin.QuorumStatus(ctx, &adminpb.QuorumStatusRequest{Name: queue})
		if err != nil {
			return -1
		}
		for _, m := range st.Members {
			if m.Node == follower.name && m.Lag != nil && (m.Role == "follower" || m.Role == "leader") {
				return int64(*m.Lag)
			}
		}
		return -1
	}
	waitCaughtUp := func(timeout time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		testwait.ForNil(t, timeout, follower.name+"'s replicas to hold every committed entry", func() error {
			for _, q := range names {
				if n := lag(q); n != 0 {
					return fmt.Errorf("its replica of %s lacks %d", q, n)
				}
			}
			return nil
		})
		return time.Since(start)
	}

	_, ch := c.nodes[0].channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(queue string) {
		t.Helper()
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("m")})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			t.Fatalf("publish not confirmed: %v", err)
		}
	}
	for _, q := range names {
		publish(q)
	}
	waitCaughtUp(30 * time.Second)

	follower.term()
	// Traffic all along the downtime, long enough for raft's backoff to
	// the stopped follower to reach its ten-second ceiling: each publish
	// has the leader try the stopped follower again.
	for i, stop := 0, time.Now().Add(21*time.Second); time.Now().Before(stop); i++ {
		publish(names[i%queues])
		time.Sleep(50 * time.Millisecond) // a steady trickle
	}
	follower.start()
	follower.waitReady(60 * time.Second)
	t.Logf("every queue caught up %v after the restarted node took logins", waitCaughtUp(3*time.Second))
}

// TestClusterRestartedNodeRoutesNewQueues: a node killed while queues are
// declared learns of them when it comes back, and its model opens their
// replicas one by one. Publishes through it meanwhile must reach the last
// of them, not be confirmed as unroutable and dropped: the chaos harness
// lost the first publish after each restart so. (Raft had applied
// everything, so the node did not count itself behind; its model had not.)
func TestClusterRestartedNodeRoutesNewQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster process test")
	}
	c := startProcCluster(t, 3, clusterOpts{})
	back := c.nodes[2]
	back.kill()
	for i := range 40 {
		declareQuorum(t, c.nodes[0], fmt.Sprintf("fill%d", i))
	}
	declareQuorum(t, c.nodes[0], "late")
	back.start()

	// Publish through the restarted node from its first login on.
	var ch *amqp091.Channel
	deadline := time.Now().Add(60 * time.Second)
	for ch == nil {
		if time.Now().After(deadline) {
			t.Fatal("the restarted node took no login in 60 s")
		}
		conn, err := amqp091.Dial(back.url())
		if err != nil {
			// Tries often, not with testwait's backoff: the publishes
			// are to start at the node's very first login.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		t.Cleanup(func() { conn.Close() })
		if ch, err = conn.Channel(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirmed, _ := answers(t, publishNumbered(t, ch, "late", 200, 0))
	if len(confirmed) == 0 {
		t.Fatal("no publish confirmed")
	}

	// Every confirmed message is in the queue, read through another node.
	_, rch := c.nodes[0].channel(t)
	for len(confirmed) > 0 {
		d, ok, err := rch.Get("late", true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("%d confirmed publishes are not in the queue, e.g. %v", len(confirmed), someKeys(confirmed, 5))
		}
		delete(confirmed, string(d.Body))
	}
}

func someKeys(m map[string]bool, n int) []string {
	var ks []string
	for k := range m {
		if len(ks) == n {
			break
		}
		ks = append(ks, k)
	}
	return ks
}
