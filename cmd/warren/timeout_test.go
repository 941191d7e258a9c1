package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/proto/adminpb"
	"github.com/warrenmq/warren/raftq/testwait"
)

// TestClusterTimedOutPublishesStoredOnce: a queue's leader that loses its
// followers keeps taking publishes into its log without committing them;
// they time out (basic.nack) and go on being sent. Once the followers are
// back and the entries commit, every message is in the queue at most once
// and every confirmed one is there. The router used to number what
// followed a timeout afresh under a new publisher ID, so the group stored
// the publishes it already held again (the chaos harness saw messages
// stored three times after a queue was leaderless past the timeout).
func TestClusterTimedOutPublishesStoredOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster process test")
	}
	c := startProcCluster(t, 3, clusterOpts{})
	declareQuorum(t, c.nodes[0], "once")
	leader := queueLeader(t, c, "once")
	_, ch := leader.channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var followers []*clusterNode
	for _, nd := range c.nodes {
		if nd != leader {
			followers = append(followers, nd)
		}
	}
	for _, nd := range followers {
		nd.stopProcess(syscall.SIGSTOP)
	}
	// Publishes over twice the test nodes' 5 s publish timeout, so that
	// some time out while later ones still wait.
	confirms := publishNumbered(t, ch, "once", 60, 200*time.Millisecond)
	for _, nd := range followers {
		nd.stopProcess(syscall.SIGCONT)
	}
	confirmed, nacked := answers(t, confirms)
	if nacked == 0 {
		t.Fatal("no publish timed out: the test did not test")
	}
	t.Logf("%d confirmed, %d nacked (timed out)", len(confirmed), nacked)

	// The nacked publishes may be stored or not; none twice.
	_, rch := c.nodes[0].channel(t)
	seen := map[string]bool{}
	// What arrived within 30 s is checked below.
	testwait.Until(30*time.Second, func() bool {
		for {
			d, ok, err := rch.Get("once", true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return len(seen) >= len(confirmed)
			}
			b := string(d.Body)
			if seen[b] {
				t.Errorf("message %s stored twice", b)
			}
			seen[b] = true
		}
	})
	for b := range confirmed {
		if !seen[b] {
			t.Errorf("confirmed message %s not in the queue", b)
		}
	}
}

// stopProcess sends the process a signal without waiting for it to exit
// (SIGSTOP, SIGCONT).
func (nd *clusterNode) stopProcess(s syscall.Signal) {
	nd.mu.Lock()
	cmd := nd.cmd
	nd.mu.Unlock()
	if err := cmd.Process.Signal(s); err != nil {
		nd.t.Fatalf("signal %s: %v", nd.name, err)
	}
}

// queueLeader is the node leading queue, once one does.
func queueLeader(t *testing.T, c *procCluster, queue string) *clusterNode {
	t.Helper()
	admin := adminClient(t, c.nodes[0])
	var leader *clusterNode
	testwait.For(t, 30*time.Second, "a leader for queue "+queue, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := admin.QuorumStatus(ctx, &adminpb.QuorumStatusRequest{Name: queue})
		cancel()
		if err == nil {
			for _, nd := range c.nodes {
				if nd.name == st.GetLeader() {
					leader = nd
				}
			}
		}
		return leader != nil
	})
	return leader
}

// publishNumbered publishes n persistent messages, bodies "0" to "n-1",
// gap apart, and returns their confirmations.
func publishNumbered(t *testing.T, ch *amqp091.Channel, queue string, n int, gap time.Duration) []*amqp091.DeferredConfirmation {
	t.Helper()
	confirms := make([]*amqp091.DeferredConfirmation, 0, n)
	for i := range n {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false,
			amqp091.Publishing{DeliveryMode: 2, Body: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		confirms = append(confirms, dc)
		time.Sleep(gap) // the pace asked for
	}
	return confirms
}

// answers waits up to 30 s for each confirmation and returns the bodies
// confirmed (publishNumbered's numbering) and how many were nacked.
func answers(t *testing.T, confirms []*amqp091.DeferredConfirmation) (confirmed map[string]bool, nacked int) {
	t.Helper()
	confirmed = map[string]bool{}
	for i, dc := range confirms {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ok, err := dc.WaitContext(ctx)
		cancel()
		switch {
		case err != nil:
			t.Fatalf("publish %d: no answer: %v", i, err)
		case ok:
			confirmed[fmt.Sprint(i)] = true
		default:
			nacked++
		}
	}
	return confirmed, nacked
}
